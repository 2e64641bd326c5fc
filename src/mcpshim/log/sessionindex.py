"""The session index: what `mcpshim sessions` lists, and where each session's records lie,
without decoding the log again.

Per segment, the index holds how far it has read and what those records say about each
session (start and end records, the server's name, tool calls, execs, first and last
time), where each session's records lie (byte spans; log.scope reads one session's records
by them), what every session's read needs besides its own records (session starts, spill
pointers, damaged pieces), what the process model's one state that crosses sessions
decided at each of a session's parent checks (log.ledger), and the byte marks the readers
search whole segments for (a session run with --mcp, a seal). A segment is known by device
and inode, which rotation's rename keeps, and by a hash of its first bytes, so a new file
in a reused inode is read afresh. Records are read by the readers' own decoding
(log.indexscan over log.rows), so the index says of each record what every reader makes
of it; the file's first line is the digest of the rest, so a damaged index is never read
as one. Bringing the
index up to date reads only what was appended since; what a later segment's account
depends on (a segment grown or dropped before it) makes it read again. `run` brings it up
to date when a session ends, `sessions` and the session resolver before they answer; a
missing or damaged index is rebuilt from the segments; where it cannot be written (a log
directory the user may only read) it is built in memory for the one answer. Updaters take
the index's own lock (flock), never the log's: writers never wait.

No seal covers the index: whoever can write the log directory can rewrite it consistently
(a session's spans cut short, the digest line recomputed). So in a sealed log (`holds_seal`:
a seal record's start in any segment's bytes) readers do not take it as it is stored
(`update(trust=False)` builds it afresh in memory; log.scope reads the whole log), and
`log verify` holds the stored index to the records it says it read (`disagreements`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mcpshim.base.fdio import open_regular, read_regular
from mcpshim.base.flock import open_lock, take
from mcpshim.base.safewrite import make_private_dir, write_file
from mcpshim.errors import InputError
from mcpshim.log.execlog import Anchors, segments
from mcpshim.log.indexscan import SEAL_MARK, Scan, fresh, iso_epoch, scan_file, times
from mcpshim.log.ledger import Ledger
from mcpshim.paths import Locations

__all__ = ["Index", "disagreements", "holds_seal", "index_path", "iso_epoch", "update"]

VERSION = 4  # 3: each session's spans, what its read needs besides, the readers' decoding;
# 4: a session's end keeps why it did not start (`reason`)
_HEAD = 512  # bytes hashed to tell a segment from a later file in the same inode
_CHUNK = 1 << 22


def index_path(loc: Locations) -> Path:
    return loc.index_dir / "sessions.json"


def _head(fh: Any, length: int) -> str:
    fh.seek(0)
    return hashlib.sha256(fh.read(length)).hexdigest()


@dataclass(frozen=True)
class Index:
    """The index as read: one entry per segment, oldest first (see the module docstring)."""

    entries: tuple[dict[str, Any], ...]

    def merged(self) -> dict[str, dict[str, Any]]:
        """Each session's partials folded over the segments, in log order."""
        out: dict[str, dict[str, Any]] = {}
        for e in self.entries:
            for sid, p in e["sessions"].items():
                acc = out.get(sid)
                if acc is None:
                    out[sid] = dict(p)
                    continue
                for k in ("execs", "extra", "tool_calls"):
                    acc[k] += p[k]
                for k in ("relayed", "traced"):
                    acc[k] = acc[k] or p[k]
                acc["start"] = acc["start"] or p["start"]
                acc["end"] = p["end"] or acc["end"]
                acc["server"] = p["server"] or acc["server"]
                times(acc, p["first"])
                times(acc, p["last"])
        last = Ledger(self.entries[-1].get("ledger")) if self.entries else Ledger()
        for sid, acc in out.items():
            acc["waiting"] = last.waiting(sid)  # what the end of the log decides
        return out

    def entry_for(self, path: Path) -> dict[str, Any] | None:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            for e in self.entries:
                if (e["dev"], e["ino"]) == (st.st_dev, st.st_ino):
                    return e
        return None


def _load(path: Path) -> list[dict[str, Any]]:
    """The entries; [] when the file is missing, of another version, or damaged in any
    byte (its first line is the digest of the rest): then it is built again."""
    try:
        digest, _, body = read_regular(path).partition(b"\n")
        if digest != _digest(body):
            return []
        doc = orjson.loads(body)
    except (OSError, InputError, orjson.JSONDecodeError):
        return []
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        return []
    entries = doc.get("segments")
    return entries if isinstance(entries, list) else []


def _digest(body: bytes) -> bytes:
    return hashlib.sha256(body).hexdigest().encode()


@contextlib.contextmanager
def _locked(loc: Locations, wait: float) -> Iterator[bool | None]:
    """True: locked; False: another updater held it for `wait` s; None: the index cannot
    be written here (a read-only log directory): the caller builds it in memory."""
    try:
        make_private_dir(loc.index_dir)
        fd = open_lock(loc.index_dir / "lock")
    except OSError:
        yield None
        return
    try:
        yield take(fd, wait, 0.01)
    finally:
        os.close(fd)


def _save(path: Path, entries: list[dict[str, Any]]) -> None:
    body = orjson.dumps({"version": VERSION, "segments": entries})
    write_file(path, _digest(body) + b"\n" + body, 0o600, durable=False)


_MEMO: dict[Path, tuple[tuple[Any, ...], Index]] = {}  # the last index a process made


def _signature(loc: Locations) -> tuple[Any, ...] | None:
    """The index file and the segments as they stand (None: no index file)."""
    out: list[Any] = []
    for p in (index_path(loc), *segments(loc)):
        try:
            st = os.stat(p)
        except OSError:
            if not out:
                return None
            continue
        out.append((p.name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def holds_seal(loc: Locations) -> bool:
    """Whether any segment holds a seal record's start, by its bytes (not by the index),
    read a chunk at a time (a mapped log would count whole in the reader's memory)."""
    keep = len(SEAL_MARK) - 1
    for seg in segments(loc):
        with contextlib.suppress(OSError, InputError), open_regular(seg) as fh:
            tail = b""
            while chunk := fh.read(_CHUNK):
                if SEAL_MARK in tail + chunk:
                    return True
                tail = chunk[-keep:]
    return False


def update(
    loc: Locations, budget: int | None = None, wait: float = 60.0, trust: bool = True
) -> Index | None:
    """Bring the index up to date with the segments (at most `budget` new bytes) and return
    it; None when another updater held the lock for `wait` seconds or there is no log. A
    command asks several times: while nothing changed, it gets the index it last got.
    `trust` False: the stored index is not read; one is built from the segments, in memory
    (a sealed log's readers: see the module docstring)."""
    if not loc.log_dir.is_dir():
        return None
    if not trust:
        return _build(loc)
    path = index_path(loc)
    memo = _MEMO.get(path) if budget is None else None
    if memo is not None and memo[0] == _signature(loc):
        return memo[1]
    index = _update(loc, budget, wait)
    if index is not None and budget is None and (sig := _signature(loc)) is not None:
        _MEMO[path] = (sig, index)
    return index


def _build(loc: Locations) -> Index:
    """The index from the segments alone, in memory."""
    return _scan(loc, {}, None, save=None)


def _update(loc: Locations, budget: int | None, wait: float) -> Index | None:
    with _locked(loc, wait) as got:
        if got is False:
            return None
        path = index_path(loc)
        if got is None:
            budget = None  # nothing kept: read it all, this once
        old = {(e["dev"], e["ino"]): e for e in _load(path)}
        return _scan(loc, old, budget, path if got else None)


def _scan(
    loc: Locations, old: dict[Any, dict[str, Any]], budget: int | None, save: Path | None
) -> Index:
    """The segments read on from what `old` holds (at most `budget` new bytes); saved to
    `save` when anything changed."""
    anchors = Anchors(loc.boot_dir)
    entries: list[dict[str, Any]] = []
    changed = len(old) == 0
    state: dict[str, Any] | None = None  # the ledger where the previous segment ended
    paths = segments(loc)
    now = set()
    for seg in paths:
        with contextlib.suppress(OSError):
            st = os.stat(seg)
            now.add((st.st_dev, st.st_ino))
    # A segment dropped (or grown, below) changes what every later one's account starts
    # from (log.ledger): those are read again.
    restarted = any(key not in now for key in old)
    for seg in paths:
        try:
            fh = open_regular(seg)
        except FileNotFoundError:
            continue  # rotated away meanwhile
        with fh:
            st = os.fstat(fh.fileno())
            entry = old.pop((st.st_dev, st.st_ino), None)
            if entry is not None and (
                st.st_size < entry["offset"]
                or (entry["head_len"] and _head(fh, entry["head_len"]) != entry["head"])
            ):
                entry = None
            if entry is None or restarted:
                entry, changed, restarted = fresh(seg.name, st), True, True
            if entry["name"] != seg.name:
                entry["name"], changed = seg.name, True
            if st.st_size > entry["offset"] and (budget is None or budget > 0):
                ledger = Ledger(entry["ledger"] if entry["offset"] else state)
                scan = Scan(entry, anchors, loc.spill_dir, ledger)
                used = scan_file(fh, seg.name, entry, scan, budget)
                scan.done()
                budget = None if budget is None else budget - used
                changed = changed or used > 0
                restarted = restarted or used > 0
            elif not entry["offset"]:
                entry["ledger"] = Ledger(state).state()
            state = entry["ledger"]
            want = min(_HEAD, entry["offset"])
            if entry["head_len"] < want:
                entry["head"], entry["head_len"] = _head(fh, want), want
        entries.append(entry)
    if (changed or old) and save is not None:
        _save(save, entries)
    return Index(tuple(entries))


class _Upto:
    """A segment read up to `limit` bytes (what the stored index says it read)."""

    def __init__(self, fh: Any, limit: int) -> None:
        self.fh, self.limit = fh, limit

    def seek(self, pos: int) -> None:
        self.fh.seek(pos)

    def read(self, n: int) -> bytes:
        left = self.limit - self.fh.tell()
        return self.fh.read(min(n, left)) if left > 0 else b""


def disagreements(loc: Locations) -> list[tuple[str, str]]:
    """Where the stored index says other than the records it says it read (each segment
    read again up to its offset, as the index reads it): (where, why). A missing or
    damaged index says nothing (it is built again before use); one behind the log is
    not wrong."""
    stored = {(e["dev"], e["ino"]): e for e in _load(index_path(loc))}
    anchors = Anchors(loc.boot_dir)
    state: dict[str, Any] | None = None
    out: list[tuple[str, str]] = []
    for seg in segments(loc):
        try:
            fh = open_regular(seg)
        except FileNotFoundError:
            continue
        with fh:
            st = os.fstat(fh.fileno())
            kept = stored.get((st.st_dev, st.st_ino))
            if kept is None:
                break  # not read by the index yet: what comes after depends on it
            if kept["offset"] > st.st_size:
                why = f"says it read {kept['offset']} bytes of a segment of {st.st_size}"
                out.append((f"index/sessions.json ({seg.name})", why))
                break
            mine = fresh(seg.name, st)
            scan = Scan(mine, anchors, loc.spill_dir, Ledger(state))
            scan_file(_Upto(fh, kept["offset"]), seg.name, mine, scan, None)
            scan.done()
            if not mine["offset"]:
                mine["ledger"] = Ledger(state).state()
            want = min(_HEAD, mine["offset"])
            mine["head"], mine["head_len"] = (_head(fh, want), want) if want else ("", 0)
            mine = orjson.loads(orjson.dumps(mine))  # as stored: lists, string keys
            state = mine["ledger"]
        if why := _differs(kept, mine):
            out.append((f"index/sessions.json ({seg.name})", why))
    return out


def _differs(kept: dict[str, Any], mine: dict[str, Any]) -> str:
    keys = [k for k in sorted(set(kept) | set(mine)) if k != "name" and kept.get(k) != mine.get(k)]
    if not keys:
        return ""
    sids = sorted(
        sid
        for k in ("sessions", "spans", "known")
        if isinstance(kept.get(k), dict) and isinstance(mine.get(k), dict)
        for sid in set(kept[k]) | set(mine[k])
        if kept[k].get(sid) != mine[k].get(sid)
    )
    whose = f"; sessions {', '.join(dict.fromkeys(sids))}" if sids else ""
    return (
        f"the session index disagrees with the records it says it read ({', '.join(keys)}"
        f"{whose}): rewritten, so a reader of one session would not read all of it"
    )
