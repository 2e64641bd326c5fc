"""The session index: what `mcpshim sessions` lists, without decoding the log again.

Per segment, the index holds how far it has read and what those records say about each
session (start and end records, the server's name, tool calls, execs, first and last
time). A segment is known by device and inode, which rotation's rename keeps, and by a
hash of its first bytes, so a new file in a reused inode is read afresh. Bringing the index
up to date reads only what was appended since, with a byte scan over the NUL framing (exec
records are not decoded: about ten times faster than the reader). `run` brings it up to
date when a session ends, `sessions` and the session resolver before they answer; a missing
or damaged index is rebuilt from the segments, and a dropped segment's records drop out
with it; where it cannot be written (a log directory the user may only read) it is built in
memory for the one answer. Updaters take the index's own lock (flock), never the log's:
writers never wait.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import math
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from mcpshim.base.fdio import open_regular
from mcpshim.base.safewrite import make_private_dir, write_file
from mcpshim.errors import InputError
from mcpshim.log.execlog import Anchors, segments
from mcpshim.log.ledger import SHELLS, Ledger, ident_key, sample_is_helper, trace_is_exec
from mcpshim.paths import Locations

__all__ = ["Index", "index_path", "iso_epoch", "update"]

VERSION = 2  # 2: execs are the process model's (log.ledger)
_HEAD = 512  # bytes hashed to tell a segment from a later file in the same inode
_CHUNK = 1 << 22
_Q = b"*+" if sys.version_info >= (3, 11) else b"*"  # possessive: no backtracking
_F = rb"[^\0]" + _Q
# exec: btime, uptime, boot id, 8 fields, the session, the rest; any other kind: one JSON
# field; a spill pointer. A torn record never matches: its next tag is \0R, not \0= or \0\n.
_RX = re.compile(
    rb"\0R\0=1\0=(?:exec\0=(" + _F + rb")\0=(" + _F + rb")\0=(" + _F + rb")((?:\0=" + _F
    + rb"){8})\0=(" + _F + rb")\0=" + _F + rb"\0=" + _F + rb"\0=(" + _F + rb")(?:\0=" + _F
    + rb")" + _Q + rb"|([^\0]+)\0=(" + _F + rb"))\0\n"
    rb"|\0P\0=1\0=([^\0]+)\0\n"
)  # fmt: skip
_SHELL_NAMES = frozenset(n.encode() for n in SHELLS)
_START_KEYS = ("time", "name", "command", "cwd", "user", "pid", "boot_id")
_END_KEYS = ("time", "exit_status", "duration_s", "survivors", "terminated", "cause")


def index_path(loc: Locations) -> Path:
    return loc.index_dir / "sessions.json"


def iso_epoch(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def _partial() -> dict[str, Any]:
    return {
        "execs": 0,  # shim records
        "extra": 0,  # the other execs the ledger counted (traced, sampled, parents)
        "tool_calls": 0,
        "first": None,
        "last": None,
        "start": None,
        "end": None,
        "relayed": False,
        "traced": False,
        "server": None,
    }


def _times(p: dict[str, Any], t: float | None) -> None:
    if t is not None:
        p["first"] = t if p["first"] is None else min(p["first"], t)
        p["last"] = t if p["last"] is None else max(p["last"], t)


class _Scan:
    """Folds records into one segment's entry."""

    def __init__(
        self, entry: dict[str, Any], anchors: Anchors, spill_dir: Path, ledger: Ledger
    ) -> None:
        self.entry = entry
        self.anchors = anchors
        self.spill_dir = spill_dir
        self.ledger = ledger  # which record is an exec (log.ledger): the readers' count

    def _session(self, sid: str) -> dict[str, Any]:
        got: dict[str, Any] | None = self.entry["sessions"].get(sid)
        if got is None:
            got = self.entry["sessions"][sid] = _partial()
        return got

    def feed(self, buf: bytes, nested: bool = False) -> None:
        execs: dict[bytes, list[Any]] = {}
        n = 0
        for bt, up, boot, mid, sess, pcmd, kind, body, spill in _RX.findall(buf):
            if spill:
                if not nested:
                    self._spill(spill)
                continue
            n += 1
            if kind:
                self._event(kind, body)
                continue
            if pcmd or mid.rsplit(b"\0=", 3)[1] in _SHELL_NAMES:
                self._shell(boot, mid, sess, bool(pcmd))
            a = execs.get(sess)
            if a is None:
                execs[sess] = [1, bt, up, boot, bt, up, boot]
            else:
                a[0] += 1
                a[4], a[5], a[6] = bt, up, boot
        self.entry["records"] += n
        for sess, a in execs.items():
            if not sess:
                self.entry["other"] += a[0]
                continue
            p = self._session(sess.decode("utf-8", "replace"))
            p["execs"] += a[0]
            _times(p, self._when(a[1], a[2], a[3]))
            _times(p, self._when(a[4], a[5], a[6]))

    def _shell(self, boot_b: bytes, mid: bytes, sess_b: bytes, parent: bool) -> None:
        """A shim record the ledger must see: a shell's (a parent to recognise), or one
        holding its shell's command line (that shell's exec, when nothing else saw it)."""
        pid, ppid, start, pstart, _cwd, shim = (
            x.decode("utf-8", "replace") for x in mid.split(b"\0=")[1:7]
        )
        boot, sid = boot_b.decode("ascii", "replace"), sess_b.decode("utf-8", "replace")
        key = ident_key(boot, _num(ppid), _num(pstart)) if parent and ppid else None
        self.ledger.shim(sid, shim, ident_key(boot, _num(pid), _num(start)), key)
        self.ledger.sessions[sid].entries -= 1  # the shim record itself: counted in `execs`

    def _when(self, bt: bytes, up: bytes, boot: bytes) -> float | None:
        try:
            base = float(bt) if bt else self.anchors.get(boot.decode("ascii", "replace"))
            t = None if base is None else base + float(up)
        except ValueError:
            return None
        return t if t is not None and math.isfinite(t) else None

    def _spill(self, name: bytes) -> None:
        text = name.decode("ascii", "replace")
        if "/" in text or text.startswith("."):
            return
        with contextlib.suppress(OSError, InputError), open_regular(self.spill_dir / text) as fh:
            data = fh.read()
            if data.startswith(b"\0R") and data.endswith(b"\0\n"):
                self.feed(data, nested=True)

    def _event(self, kind_b: bytes, body: bytes) -> None:
        kind = kind_b.decode("ascii", "replace")
        try:
            d = orjson.loads(body)
        except orjson.JSONDecodeError:
            d = None
        sid = d.get("session") if isinstance(d, dict) else None
        if kind == "exec" or not isinstance(d, dict) or not isinstance(sid, str):
            self.entry["other"] += 1
            return
        p = self._session(sid)
        _times(p, iso_epoch(d.get("time")))
        led = self.ledger
        if kind == "session-start":
            p["start"] = {k: d.get(k) for k in _START_KEYS}
            led.start(sid, d.get("trace"))
        elif kind == "session-end":
            p["end"] = {k: d.get(k) for k in _END_KEYS}
            led.end(sid)
        elif kind == "mcp-session":
            p["relayed"] = True
        elif kind == "mcp-request" and d.get("method") == "tools/call":
            p["tool_calls"] += 1
        elif kind == "mcp-initialize":
            p["server"] = {"name": d.get("server_name"), "version": d.get("server_version")}
        elif kind == "observed" and not sample_is_helper(d):
            led.sample(sid, ident_key(d.get("boot_id") or "", d.get("pid"), d.get("start")))
        elif kind == "trace-gap":
            led.counted(sid, d.get("seen_as") != "trace")
        elif kind in ("trace-exec", "trace-summary"):
            p["traced"] = True
            if kind == "trace-exec":
                led.counted(sid, trace_is_exec(d))
            else:
                led.summary(sid)

    def done(self) -> None:
        """What the ledger decided goes into this segment's partials; its state is kept."""
        for sid, s in self.ledger.sessions.items():
            if s.entries and sid:
                self._session(sid)["extra"] += s.entries
            s.entries = 0
        self.entry["ledger"] = self.ledger.state()


def _num(text: str) -> int | str:
    """A pid or a start as the readers key it (an int; anything else as written)."""
    return int(text) if text.isdigit() and len(text) <= 18 else text if text else "None"


def _head(fh: Any, length: int) -> str:
    fh.seek(0)
    return hashlib.sha256(fh.read(length)).hexdigest()


def _fresh(name: str, st: os.stat_result) -> dict[str, Any]:
    return {
        "name": name,
        "dev": st.st_dev,
        "ino": st.st_ino,
        "head": "",
        "head_len": 0,
        "offset": 0,
        "records": 0,
        "other": 0,
        "sessions": {},
    }


def _scan_file(fh: Any, entry: dict[str, Any], scan: _Scan, budget: int | None) -> int:
    """Read whole records from entry['offset'] on; returns the bytes consumed."""
    fh.seek(entry["offset"])
    carry = b""
    used = 0
    while budget is None or used < budget:
        chunk = fh.read(_CHUNK)
        if not chunk:
            break
        buf = carry + chunk if carry else chunk
        end = buf.rfind(b"\0\n")
        if end < 0:
            carry = buf
            continue
        scan.feed(buf[: end + 2])
        entry["offset"] += end + 2
        used += end + 2
        carry = buf[end + 2 :]
    return used


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
                _times(acc, p["first"])
                _times(acc, p["last"])
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
    try:
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return []
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        return []
    entries = doc.get("segments")
    return entries if isinstance(entries, list) else []


@contextlib.contextmanager
def _locked(loc: Locations, wait: float) -> Iterator[bool | None]:
    """True: locked; False: another updater held it for `wait` s; None: the index cannot
    be written here (a read-only log directory): the caller builds it in memory."""
    try:
        make_private_dir(loc.index_dir)
        fd = os.open(
            loc.index_dir / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
        )
    except OSError:
        yield None
        return
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                yield False
                return
            time.sleep(0.01)
        yield True
    finally:
        os.close(fd)


def _save(path: Path, entries: list[dict[str, Any]]) -> None:
    data = orjson.dumps({"version": VERSION, "segments": entries})
    write_file(path, data, 0o600, durable=False)


def update(loc: Locations, budget: int | None = None, wait: float = 60.0) -> Index | None:
    """Bring the index up to date with the segments (at most `budget` new bytes) and return
    it; None when another updater held the lock for `wait` seconds or there is no log."""
    if not loc.log_dir.is_dir():
        return None
    with _locked(loc, wait) as got:
        if got is False:
            return None
        path = index_path(loc)
        if got is None:
            budget = None  # nothing kept: read it all, this once
        old = {(e.get("dev"), e.get("ino")): e for e in _load(path) if isinstance(e, dict)}
        anchors = Anchors(loc.boot_dir)
        entries: list[dict[str, Any]] = []
        changed = len(old) == 0
        state: dict[str, Any] | None = None  # the ledger where the previous segment ended
        restarted = False  # a segment read afresh: the ones after it are read again too
        for seg in segments(loc):
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
                if entry is None or restarted or "ledger" not in entry:
                    entry, changed, restarted = _fresh(seg.name, st), True, True
                if entry["name"] != seg.name:
                    entry["name"], changed = seg.name, True
                if st.st_size > entry["offset"] and (budget is None or budget > 0):
                    ledger = Ledger(entry["ledger"] if entry["offset"] else state)
                    scan = _Scan(entry, anchors, loc.spill_dir, ledger)
                    used = _scan_file(fh, entry, scan, budget)
                    scan.done()
                    budget = None if budget is None else budget - used
                    changed = changed or used > 0
                elif not entry["offset"]:
                    entry["ledger"] = Ledger(state).state()
                state = entry["ledger"]
                want = min(_HEAD, entry["offset"])
                if entry["head_len"] < want:
                    entry["head"], entry["head_len"] = _head(fh, want), want
            entries.append(entry)
        if (changed or old) and got:
            _save(path, entries)
        return Index(tuple(entries))
