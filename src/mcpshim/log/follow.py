"""The one tailer of the log: records as they are written, once each, across rotations.

Its users: `log --follow` (time order across writers, below), and the readers that follow
the log while a session runs, in log order and without a lag (`Follower.tail`: the
supervisor's sampler and its departure watch; `Follower.start(since=...)`: `run --otlp`'s
live stream, from where the log stood before the session began).

Sources. The live log is read as it grows. Rotation renames it: a shim that opened it just
before finishes its write in the renamed file, so a renamed file stays a source for
`GRACE` seconds. When the live log's inode changes, the new one is opened first and then
every rotated segment not read yet is taken in (a rotation between two polls, or two of
them, can hide a whole segment otherwise). A segment read before is known by device, inode
and a hash of its first bytes (an inode is reused only after its file is gone), and only
what it gained since is read again.

Order. A writer writes into the file that was live when it opened it, so of two records
of one writer the later one is never in an older file. Each poll reads the newest source
first and numbers records oldest source first: a writer's record seen in this poll is
never numbered before one of its earlier records. Records then wait `lag` seconds (the
recorder writes an mcp-request up to a second after the execs it caused) and go out sorted
by (time, number); one that arrives later than that goes out at once, never dropped.
With no lag (None) each poll returns what it read as read: oldest source first, each in
its file's order.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import io
import itertools
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from mcpshim.base.fdio import open_regular
from mcpshim.errors import InputError
from mcpshim.log import execlog
from mcpshim.log.execlog import Anchors, EventRecord, LogProblem, Record
from mcpshim.log.sessionindex import iso_epoch
from mcpshim.paths import Locations

__all__ = ["GRACE", "Follower", "Mark", "mark"]

GRACE = 5.0  # seconds a renamed segment is still read (late shim writes)
_HEAD = 512
_READ = 1 << 20

Ident = tuple[int, int]


@dataclass
class _Source:
    fh: BinaryIO
    name: str
    ident: Ident
    offset: int = 0  # bytes consumed: whole records only
    carry: bytes = b""
    retired: float | None = None  # when it stopped being the live log

    def read(
        self, loc: Locations, problems: list[LogProblem], anchors: Anchors, limit: int = _READ
    ) -> list[Record]:
        out: list[Record] = []
        while True:
            data = self.fh.read(limit)
            if not data:
                return out
            buf = self.carry + data
            end = buf.rfind(b"\0\n")
            if end < 0:
                self.carry = buf
                continue
            whole, self.carry = buf[: end + 2], buf[end + 2 :]
            stream = io.BytesIO(whole)
            out += execlog.read_stream(
                stream, self.name, loc.spill_dir, problems, anchors, self.offset
            )
            self.offset += len(whole)


@dataclass(frozen=True)
class Mark:
    """Where the log stood: the live log's identity (None: there was none) and its size."""

    ident: Ident | None
    offset: int


def mark(loc: Locations) -> Mark:
    """The log's end now: what a follower started later with `since` reads on from."""
    try:
        st = os.stat(loc.log_file)
    except FileNotFoundError:
        return Mark(None, 0)
    return Mark((st.st_dev, st.st_ino), st.st_size)


def _head(fh: BinaryIO, n: int) -> str:
    here = fh.tell()
    fh.seek(0)
    digest = hashlib.sha256(fh.read(n)).hexdigest()
    fh.seek(here)
    return digest


def record_time(rec: Record, arrival: float) -> float:
    if isinstance(rec, EventRecord):
        t = iso_epoch(rec.data.get("time"))
    else:
        t = rec.btime + rec.uptime if rec.btime is not None and rec.uptime is not None else None
    return arrival if t is None or not math.isfinite(t) else t


@dataclass
class Follower:
    """Reads the log's sources; `poll()` returns the records whose turn has come."""

    loc: Locations
    problems: list[LogProblem]
    lag: float | None = 1.0  # None: log order, at once
    sources: list[_Source] = field(default_factory=list)  # oldest first; the last is live
    seen: dict[Ident, tuple[str, int, int]] = field(default_factory=dict)  # head, len, offset
    _heap: list[tuple[float, int, float, Record]] = field(default_factory=list)
    _seq: Iterator[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.anchors = Anchors(self.loc.boot_dir)

    @classmethod
    def tail(cls, loc: Locations) -> Follower:
        """From the log's end on, in log order: what is being written now. A log that does
        not exist yet is read from its start once it does."""
        fol = cls(loc, [], lag=None)
        if loc.log_dir.is_dir():
            fol.start(history=False)
        return fol

    def start(self, history: bool, since: Mark | None = None) -> list[Record]:
        """Open every segment; return what they hold (history) or skip to their ends.
        `since`: return what was written after that mark (the file it names from its
        offset, the segments rotated after it whole; if it is gone, every segment)."""
        if not self.loc.log_dir.is_dir():
            raise InputError(f"no exec log at {self.loc.log_dir} (run `mcpshim install` first)")
        out: list[Record] = []
        now = time.time()
        opened = [(p, src) for p in execlog.segments(self.loc) if (src := self._open(p.name))]
        at = None  # the marked file's place among them; -1: gone (every one is newer)
        if since is not None:
            at = next((i for i, (_, s) in enumerate(opened) if s.ident == since.ident), -1)
        for i, (p, src) in enumerate(opened):
            if p != self.loc.log_file:
                src.retired = now
            if since is not None and i == at:
                src.offset = src.fh.seek(since.offset)
            if history or (at is not None and i >= at):
                out += src.read(self.loc, self.problems, self.anchors)
            else:
                src.offset = src.fh.seek(0, os.SEEK_END)
                src.offset -= self._torn_tail(src)
            self.sources.append(src)
        return out

    def _torn_tail(self, src: _Source) -> int:
        """Bytes after the last whole record (a write in progress is never split)."""
        n = min(src.offset, _READ)
        src.fh.seek(src.offset - n)
        tail = src.fh.read(n)
        end = tail.rfind(b"\0\n")
        back = n if end < 0 else len(tail) - end - 2
        src.fh.seek(src.offset - back)
        return back

    def _open(self, name: str) -> _Source | None:
        try:
            fh = open_regular(self.loc.log_dir / name)
        except FileNotFoundError:
            return None
        st = os.fstat(fh.fileno())
        return _Source(fh, name, (st.st_dev, st.st_ino))

    def _live_changed(self) -> bool:
        try:
            st = os.stat(self.loc.log_file)
        except FileNotFoundError:
            return False
        live = self.sources[-1] if self.sources and self.sources[-1].retired is None else None
        return live is None or (st.st_dev, st.st_ino) != live.ident

    def _discover(self, now: float) -> None:
        """The live log changed: open the new one, then take in what rotation hid."""
        for s in self.sources:
            if s.retired is None:
                s.retired = now
        live = self._open(self.loc.log_file.name)
        held = {s.ident: s for s in self.sources}
        for p in execlog.segments(self.loc):
            if p == self.loc.log_file:
                continue
            with contextlib.suppress(OSError):
                st = os.stat(p)
                ident = (st.st_dev, st.st_ino)
                if ident in held:
                    held[ident].name = p.name
                    continue
                old = self.seen.get(ident)
                if old is not None and st.st_size <= old[2]:
                    continue  # read before, and nothing since
                if live is not None and ident == live.ident:
                    continue  # renamed after we opened it: the next poll sees to it
                src = self._open(p.name)
                if src is None or src.ident != ident:
                    continue
                src.retired = now
                if old is not None and old[1] and _head(src.fh, old[1]) == old[0]:
                    src.offset = src.fh.seek(old[2])  # read before: only what it gained
                    del self.seen[ident]
                self.sources.append(src)
        # oldest first: by segment number; one renamed and gone already counts as oldest
        self.sources.sort(key=lambda s: int(s.name[9:]) if s.name[9:].isdigit() else -1)
        if live is not None:
            if any(s.ident == live.ident for s in self.sources):
                live.fh.close()
            else:
                self.sources.append(live)

    def _retire(self, now: float) -> None:
        keep: list[_Source] = []
        for s in self.sources:
            if s.retired is not None and now - s.retired > GRACE:
                n = min(_HEAD, s.offset)
                self.seen[s.ident] = (_head(s.fh, n), n, s.offset)
                s.fh.close()
            else:
                keep.append(s)
        self.sources = keep

    def _read_all(self, now: float) -> list[Record]:
        """What the sources gained (the newest read first), oldest source first; with a
        lag, into the heap (numbered in that order) instead."""
        batches = [s.read(self.loc, self.problems, self.anchors) for s in reversed(self.sources)]
        got = [rec for batch in reversed(batches) for rec in batch]
        if self.lag is None:
            return got
        for rec in got:
            heapq.heappush(self._heap, (record_time(rec, now), next(self._seq), now, rec))
        return []

    def poll(self) -> list[Record]:
        now = time.time()
        if self._live_changed():
            self._discover(now)
        out = self._read_all(now)
        self._retire(now)
        lag = self.lag
        while (
            lag is not None
            and self._heap
            and (self._heap[0][0] <= now - lag or self._heap[0][2] <= now - lag)
        ):
            out.append(heapq.heappop(self._heap)[3])
        return out

    def flush(self) -> list[Record]:
        """Stop: everything read so far and what the sources still hold, in order."""
        now = time.time()
        if self._live_changed():
            self._discover(now)
        out = self._read_all(now)
        out += [heapq.heappop(self._heap)[3] for _ in range(len(self._heap))]
        self.close()
        return out

    def close(self) -> None:
        for s in self.sources:
            s.fh.close()
        self.sources = []
