"""One session's part of the log: the bytes a reader of one session reads, by the session
index (log.sessionindex), and every byte where the index cannot say.

A reader of session S (review, tree, report, approve, baseline save, `log --session`,
`export otlp --session`) reads S's spans, what every session's read needs besides (the
session starts: supervisors and servers by pid; spill pointers; damaged pieces, so each
problem is said as a whole-log read says it), and from the first byte the index has not
read on, everything. What linking S's processes needs from outside its spans is what the
process model's one cross-session state decided there (log.ledger): each of S's parent
checks gets the whole log's answer, from the index, as a `Recall` just before its record,
and where everything is read the ledger starts from the index's state at that byte.
Everything else a reader of S keeps is S's own (its families link only S's records).
A segment the index does not hold as it is now (dropped, out of order, shorter) makes the
read the whole log's: the answer is the same either way, never different. So does a sealed
log: no seal covers the index, so its spans are not taken there (log.sessionindex).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mcpshim.base.fdio import open_regular_fd
from mcpshim.errors import InputError
from mcpshim.log import execlog, sessionindex
from mcpshim.log.execlog import ExecRecord, LogProblem, Record
from mcpshim.log.indexscan import MARKED, MCP_MARK, SEAL_MARK, add_span
from mcpshim.log.ledger import Recall
from mcpshim.log.rows import ExecRows, Row
from mcpshim.paths import Locations

__all__ = ["ENABLED", "Scope", "latest_relayed", "records", "rows", "scope"]

#: tests switch scoped reads off to hold them equal to the whole log's
ENABLED = True
MCP_KIND = b"mcp-session"


class _PRead:
    """[start, end) of a descriptor, read with pread."""

    def __init__(self, fd: int, start: int, end: int) -> None:
        self.fd, self.pos, self.end = fd, start, end

    def read(self, n: int = -1) -> bytes:
        n = self.end - self.pos if n < 0 else min(n, self.end - self.pos)
        data = os.pread(self.fd, n, self.pos) if n > 0 else b""
        self.pos += len(data)
        return data


def _union(a: list[int], b: list[int], limit: int) -> list[tuple[int, int]]:
    """Two sorted flat span lists as one, joined across gaps under GAP, cut at `limit`."""
    pairs = sorted([*zip(a[::2], a[1::2], strict=True), *zip(b[::2], b[1::2], strict=True)])
    out: list[int] = []
    for s, e in pairs:
        if s >= limit:
            break
        add_span(out, s, min(e, limit))
    return list(zip(out[::2], out[1::2], strict=True))


@dataclass(frozen=True)
class Scope:
    """Session `session`'s part of the log, planned from an up-to-date index."""

    loc: Locations
    session: str
    entries: tuple[dict[str, Any], ...]
    relayed: bool  # MARKED as run with --mcp (what review.engine's byte scan finds)
    mcp: bool  # the segments hold a session run with --mcp (attribution's byte scan)
    sealed: bool  # the segments hold a seal record's start

    def records(self, problems: list[LogProblem]) -> Iterator[Record]:
        """As `execlog.iter_records`, for this session's readers."""
        exec_rows = ExecRows()
        for item in self.rows(exec_rows, problems):
            yield exec_rows.record(item) if isinstance(item, tuple) else item

    def rows(self, exec_rows: ExecRows, problems: list[LogProblem]) -> Iterator[Row | Record]:
        """As `ExecRows.iter_log`, for this session's readers (see the module docstring)."""
        loc = self.loc
        exec_rows.anchors = execlog.Anchors(loc.boot_dir)
        files: list[tuple[str, int]] = []
        try:
            for p in execlog.segments(loc):
                with contextlib.suppress(FileNotFoundError):
                    files.append((p.name, open_regular_fd(p)))
            yield from self._read(files, exec_rows, problems)
        finally:
            for _, fd in files:
                os.close(fd)

    def _plan(self, files: list[tuple[str, int]]) -> list[tuple[dict[str, Any] | None, int]]:
        """Each file's entry (None: one after the last the index holds) and size; [] when
        the index does not hold the files as they are (then all is read)."""
        by_key = {(e["dev"], e["ino"]): i for i, e in enumerate(self.entries)}
        out: list[tuple[dict[str, Any] | None, int]] = []
        for _name, fd in files:
            st = os.fstat(fd)
            i = by_key.get((st.st_dev, st.st_ino))
            if i is None:
                if len(out) < len(self.entries):
                    return []  # a file before the last one the index holds: not its log
                out.append((None, st.st_size))
            elif i != len(out) or st.st_size < self.entries[i]["offset"]:
                return []  # a segment dropped, moved or cut since
            else:
                out.append((self.entries[i], st.st_size))
        return out if len(out) >= len(self.entries) else []

    def _read(
        self, files: list[tuple[str, int]], exec_rows: ExecRows, problems: list[LogProblem]
    ) -> Iterator[Row | Record]:
        plan = self._plan(files)
        spill = self.loc.spill_dir
        state: dict[str, Any] = {}  # the ledger where everything starts being read
        everything = not plan
        for (name, fd), (entry, size) in zip(files, plan or [(None, -1)] * len(files), strict=True):
            if everything:
                yield from exec_rows.read(_PRead(fd, 0, os.fstat(fd).st_size), name, spill,
                                          problems)  # fmt: skip
                continue
            if entry is None:  # a file after all the index has read
                everything = True
                yield Recall("", recent=tuple(state.get("recent", ())))
                yield from exec_rows.read(_PRead(fd, 0, size), name, spill, problems)
                continue
            state, limit = entry["ledger"], entry["offset"]
            known = set(entry["known"].get(self.session, ()))
            spans = _union(entry["spans"].get(self.session, []), entry["shared"], limit)
            for start, end in spans:
                read = exec_rows.read(_PRead(fd, start, end), name, spill, problems, start)
                yield from self._told(read, exec_rows, known)
            if size > limit:  # appended since the index read: all of it from here on
                everything = True
                yield Recall("", recent=tuple(state.get("recent", ())))
                yield from exec_rows.read(_PRead(fd, limit, size), name, spill, problems, limit)

    def _told(
        self, items: Iterator[Row | Record], exec_rows: ExecRows, known: set[int]
    ) -> Iterator[Row | Record]:
        """The items, each parent check of this session told the whole log's answer."""
        tails, sid = exec_rows.tails, self.session
        for item in items:
            if isinstance(item, tuple):
                tail = tails[item[2]]
                if tail.parent_cmdline and item[5] is not None and tail.session == sid:
                    yield Recall("", known=item[1] in known)
            elif (
                isinstance(item, ExecRecord)
                and item.session == sid
                and item.parent_cmdline
                and item.ppid is not None
            ):
                yield Recall("", known=exec_rows.at in known)
            yield item


def _unread(loc: Locations, entries: tuple[dict[str, Any], ...]) -> bytes:
    """The bytes of each segment the index has not read (what was appended since)."""
    by_key = {(e["dev"], e["ino"]): e["offset"] for e in entries}
    out = []
    for p in execlog.segments(loc):
        with contextlib.suppress(OSError, InputError):
            fd = open_regular_fd(p)
            try:
                st = os.fstat(fd)
                start = by_key.get((st.st_dev, st.st_ino), 0)
                out.append(os.pread(fd, max(st.st_size - start, 0), start))
            finally:
                os.close(fd)
    return b"\0\n".join(out)  # no mark spans two segments


def scope(loc: Locations, session: str | None) -> Scope | None:
    """Session `session`'s part of the log; None: read the whole log (no session, no
    index to be had, or scoped reads switched off)."""
    if session is None or not ENABLED or not loc.log_dir.is_dir():
        return None
    if sessionindex.holds_seal(loc):
        return None  # the index is not sealed: in a sealed log its spans are not taken
    index = sessionindex.update(loc)
    if index is None:
        return None
    entries = index.entries
    rest = _unread(loc, entries)
    relayed = {s for e in entries for s in e["relayed"]}
    relayed |= {s.decode("utf-8", "replace") for k, s in MARKED.findall(rest) if k == MCP_KIND}
    return Scope(
        loc,
        session,
        entries,
        session in relayed,
        any(e["marks"][0] for e in entries) or MCP_MARK in rest,
        any(e["marks"][1] for e in entries) or SEAL_MARK in rest,
    )


def records(loc: Locations, session: str | None, problems: list[LogProblem]) -> Iterator[Record]:
    """The records a reader of `session` reads (every record without one)."""
    sc = scope(loc, session)
    return execlog.iter_records(loc, problems) if sc is None else sc.records(problems)


def rows(
    loc: Locations, session: str | None, exec_rows: ExecRows, problems: list[LogProblem]
) -> Iterator[Row | Record]:
    """As `records`, read as rows (log.rows)."""
    sc = scope(loc, session)
    return exec_rows.iter_log(loc, problems) if sc is None else sc.rows(exec_rows, problems)


def latest_relayed(loc: Locations, problems: list[LogProblem]) -> str | None:
    """The last session in the log that was relayed with --mcp: from the index when it has
    read the whole log, else from every record."""
    on = ENABLED and loc.log_dir.is_dir()
    index = sessionindex.update(loc, trust=not sessionindex.holds_seal(loc)) if on else None
    if index is None or MCP_MARK in _unread(loc, index.entries):
        from mcpshim.log.execlog import EventRecord

        last = None
        for rec in execlog.iter_records(loc, problems):
            if isinstance(rec, EventRecord) and rec.kind == "mcp-session":
                sid = rec.data.get("session")
                last = sid if isinstance(sid, str) else last
        return last
    found = [e["last_relayed"] for e in index.entries if e["last_relayed"]]
    return found[-1] if found else None
