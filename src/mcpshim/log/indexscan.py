"""What one segment's records say for the session index (log.sessionindex): each
session's partial account, where its records lie, what every session's read needs besides
(log.scope), the ledger's answers at its parent checks, and the byte marks readers search
for. Records are read by the readers' own decoding (log.rows).
"""

from __future__ import annotations

import io
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from mcpshim.log.execlog import Anchors, EventRecord, ExecRecord
from mcpshim.log.ledger import SHELLS, Ledger, ident_key, sample_is_helper, trace_is_exec
from mcpshim.log.rows import ExecRows

__all__ = [
    "GAP",
    "MARKED",
    "MCP_MARK",
    "SEAL_MARK",
    "Scan",
    "add_span",
    "fresh",
    "iso_epoch",
    "scan_file",
    "times",
]

_CHUNK = 1 << 22
GAP = 1 << 16  # one session's spans closer than this are read as one (what lies between too)
#: how an mcp-session record's kind is framed: whole-log readers search segments for it
MCP_MARK = b"\0=mcp-session\0="
SEAL_MARK = b"\0R\0=1\0=seal\0="  # a seal record's start (seal.record.MARKER)
#: a session run with --mcp, or whose trace was summarized, by a byte scan (review.engine);
#: no NUL inside, so a match never spans two records
MARKED = re.compile(rb'\0=(mcp-session|trace-summary)\0=\{"session":"([^"\\\0]{1,200})"')
_START_KEYS = ("time", "name", "command", "cwd", "user", "pid", "boot_id")
_END_KEYS = ("time", "exit_status", "duration_s", "survivors", "terminated", "cause", "reason")


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


def times(p: dict[str, Any], t: float | None) -> None:
    if t is not None:
        p["first"] = t if p["first"] is None else min(p["first"], t)
        p["last"] = t if p["last"] is None else max(p["last"], t)


def add_span(spans: list[int], start: int, end: int) -> None:
    """[start, end) onto flat spans [s0, e0, s1, e1, ...] in order, joined across a gap
    under GAP."""
    if spans and start - spans[-1] <= GAP:
        spans[-1] = max(spans[-1], end)
    else:
        spans += (start, end)


def _kept(value: Any) -> Any:
    """A value the index can keep (JSON's integers beyond 64 bits it cannot: null)."""
    try:
        orjson.dumps(value)
    except TypeError:
        return None
    return value


def _clock(btime: float | None, uptime: float | None) -> float | None:
    return None if btime is None or uptime is None else btime + uptime


class Scan:
    """Folds one segment's records, as every reader decodes them, into its entry."""

    def __init__(
        self, entry: dict[str, Any], anchors: Anchors, spill_dir: Path, ledger: Ledger
    ) -> None:
        self.entry = entry
        self.spill_dir = spill_dir
        self.ledger = ledger  # which record is an exec (log.ledger): the readers' count
        self.rows = ExecRows(anchors, max_tails=4096)
        self.relayed = dict.fromkeys(entry["relayed"])

    def _session(self, sid: str) -> dict[str, Any]:
        got: dict[str, Any] | None = self.entry["sessions"].get(sid)
        if got is None:
            got = self.entry["sessions"][sid] = _partial()
        return got

    def feed(self, buf: bytes, base: int, name: str) -> None:
        """Whole records, buf starting at offset `base` of the segment."""
        e = self.entry
        marks = e["marks"]
        marks[0] += buf.count(MCP_MARK)
        marks[1] += buf.count(SEAL_MARK)
        for kind, sid in MARKED.findall(buf):
            if kind == b"mcp-session":
                self.relayed[sid.decode("utf-8", "replace")] = None
        rows, spans, shared = self.rows, e["spans"], e["shared"]
        tails = rows.tails
        problems: list[Any] = []
        seen = n = other = 0
        prev = base
        execs: dict[str, list[Any]] = {}  # session -> [count, first time, last time]
        for item in rows.read(io.BytesIO(buf), name, self.spill_dir, problems, base):
            n += 1
            at, end = rows.at, rows.end
            if len(problems) != seen:  # a damaged piece before this one (or in it)
                seen = len(problems)
                add_span(shared, prev, end)
            prev = end
            if isinstance(item, tuple):
                tail = tails[item[2]]
                sid, shim, t = tail.session, tail.shim, _clock(item[8], item[9])
                boot, pid, ppid, start = item[3], item[4], item[5], item[6]
                pcmd, pstart = tail.parent_cmdline, item[7]
            elif isinstance(item, ExecRecord):
                sid, shim, t = item.session, item.shim, _clock(item.btime, item.uptime)
                boot, pid, ppid, start = item.boot_id, item.pid, item.ppid, item.start
                pcmd, pstart = item.parent_cmdline, item.parent_start
                if " -> spill/" in item.where:
                    add_span(shared, at, end)
            else:
                sid = self._event(item, at, end)
                if not sid:
                    other += 1
                    continue
                add_span(spans.setdefault(sid, []), at, end)
                continue
            if pcmd and ppid is not None:  # the process model's parent check (family.model)
                led = self.ledger
                led.shim(sid, shim, ident_key(boot, pid, start), ident_key(boot, ppid, pstart))
                led.sessions[sid].entries -= 1  # the shim record itself: counted in `execs`
                if led.known and sid:
                    e["known"].setdefault(sid, []).append(at)
            elif shim in SHELLS:
                self.ledger.prime(ident_key(boot, pid, start))
            if not sid:
                other += 1
                continue
            add_span(spans.setdefault(sid, []), at, end)
            a = execs.get(sid)
            if a is None:
                execs[sid] = [1, t, t]
            else:
                a[0] += 1
                a[2] = t
        if len(problems) != seen:
            add_span(shared, prev, base + len(buf))
        e["records"] += n
        e["other"] += other
        for sid, (count, first, last) in execs.items():
            p = self._session(sid)
            p["execs"] += count
            times(p, first)
            times(p, last)

    def _event(self, rec: EventRecord, at: int, end: int) -> str:
        """What an event record adds (the model's ledger calls, family.model); its session."""
        kind, d = rec.kind, rec.data
        sid = d.get("session")
        sid = sid if isinstance(sid, str) else ""
        if " -> spill/" in rec.where:
            add_span(self.entry["shared"], at, end)
        led = self.ledger
        if kind == "session-start":  # every session's read has them (supervisors, roots)
            add_span(self.entry["shared"], at, end)
            led.start(sid, d.get("trace"))
        elif kind == "session-end":
            led.end(sid)
        elif kind == "observed" and not sample_is_helper(d):
            led.sample(sid, ident_key(d.get("boot_id") or "", d.get("pid"), d.get("start")))
        elif kind == "trace-gap":
            led.counted(sid, d.get("seen_as") != "trace")
        elif kind == "trace-exec":
            led.counted(sid, trace_is_exec(d))
        elif kind == "trace-summary":
            led.summary(sid)
        elif kind == "mcp-session" and sid:
            self.entry["last_relayed"] = sid
        if not sid:
            return ""
        p = self._session(sid)
        times(p, iso_epoch(d.get("time")))
        if kind == "session-start":
            p["start"] = {k: _kept(d.get(k)) for k in _START_KEYS}
        elif kind == "session-end":
            p["end"] = {k: _kept(d.get(k)) for k in _END_KEYS}
        elif kind == "mcp-session":
            p["relayed"] = True
        elif kind == "mcp-request" and d.get("method") == "tools/call":
            p["tool_calls"] += 1
        elif kind == "mcp-initialize":
            p["server"] = {
                "name": _kept(d.get("server_name")),
                "version": _kept(d.get("server_version")),
            }
        elif kind in ("trace-exec", "trace-summary"):
            p["traced"] = True
        return sid

    def done(self) -> None:
        """What the ledger decided goes into this segment's partials; its state is kept."""
        for sid, s in self.ledger.sessions.items():
            if s.entries and sid:
                self._session(sid)["extra"] += s.entries
            s.entries = 0
        self.entry["ledger"] = self.ledger.state()
        self.entry["relayed"] = list(self.relayed)


def fresh(name: str, st: os.stat_result) -> dict[str, Any]:
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
        "spans": {},  # session -> [start, end, ...] of its records
        "shared": [],  # what every session's read needs: session starts, spills, damage
        "known": {},  # session -> offsets of its parent checks the shell was known at
        "marks": [0, 0],  # MCP_MARK, SEAL_MARK in the segment's bytes
        "relayed": [],  # sessions MARKED as run with --mcp
        "last_relayed": None,  # the session of the segment's last mcp-session record
    }


def scan_file(fh: Any, name: str, entry: dict[str, Any], scan: Scan, budget: int | None) -> int:
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
        scan.feed(buf[: end + 2], entry["offset"], name)
        entry["offset"] += end + 2
        used += end + 2
        carry = buf[end + 2 :]
    return used
