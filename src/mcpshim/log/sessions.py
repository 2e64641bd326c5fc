"""Sessions as a user names them: the list `mcpshim sessions` prints, and the one resolver
every `--session` goes through (an id, a unique prefix of one, or `last`).

Both read the session index (sessionindex), brought up to date first, and the review marks.
A session is any id records carry: one `mcpshim run` started, or an MCPSHIM_SESSION set by
hand (its execs only).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from mcpshim.errors import InputError, UsageError
from mcpshim.log import marks, sessionindex
from mcpshim.log.execlog import current_boot_id
from mcpshim.paths import Locations

__all__ = ["LAST", "SessionSummary", "list_sessions", "no_such_session", "resolve_session"]

LAST = "last"


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _utc(t: float | None) -> datetime | None:
    """A time from the index; None when a damaged record made it one no clock shows."""
    try:
        return None if t is None else datetime.fromtimestamp(t, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


@dataclass(frozen=True)
class SessionSummary:
    id: str
    name: str  # `run --name`, else the name the server gave itself in initialize
    server: str  # the server's own name and version (initialize), "" if none
    command: tuple[str, ...]
    start: datetime | None  # the session-start record's time, else its first record's
    duration_s: float | None
    exit_status: int | None
    tool_calls: int
    execs: int  # the process model's execs (log.ledger): what tree and review count
    survivors: int | None
    relayed: bool
    traced: bool
    supervised: bool  # started by `mcpshim run` (it has a session-start record)
    ended: bool
    running: bool  # no session-end yet, and its supervisor is alive on this boot
    severity: str | None  # the highest finding of its last review; None: not reviewed
    #: how it ended when not by its command exiting ("supervisor-lost"; "not-started":
    #: the command could not be run, `reason` says why), else ""
    cause: str = ""
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name or None,
            "server": self.server or None,
            "command": list(self.command),
            "start": self.start.isoformat().replace("+00:00", "Z") if self.start else None,
            "duration_s": self.duration_s,
            "exit_status": self.exit_status,
            "tool_calls": self.tool_calls,
            "execs": self.execs,
            "survivors": self.survivors,
            "relayed": self.relayed,
            "traced": self.traced,
            "supervised": self.supervised,
            "ended": self.ended,
            "running": self.running,
            "severity": self.severity,
            "cause": self.cause or None,
            "reason": self.reason or None,
        }


def _alive(start: Mapping[str, Any], boot: str) -> bool:
    pid = _int(start.get("pid"))
    return pid is not None and start.get("boot_id") == boot and os.path.exists(f"/proc/{pid}")


def _summary(sid: str, p: Mapping[str, Any], severity: str | None, boot: str) -> SessionSummary:
    start, end, server = p["start"] or {}, p["end"] or {}, p["server"] or {}
    t0 = sessionindex.iso_epoch(start.get("time")) if start else None
    t0 = p["first"] if t0 is None else t0
    told = " ".join(str(v) for v in (server.get("name"), server.get("version")) if v)
    duration = end.get("duration_s") if end else None
    if not isinstance(duration, (int, float)) and not p["start"] and p["first"] is not None:
        duration = round(p["last"] - p["first"], 3)  # a hand-set session: its records' span
    raw = start.get("command")
    command: list[Any] = raw if isinstance(raw, list) else []
    return SessionSummary(
        id=sid,
        name=str(start.get("name") or server.get("name") or ""),
        server=told,
        command=tuple(str(c) for c in command),
        start=_utc(t0),
        duration_s=float(duration) if isinstance(duration, (int, float)) else None,
        exit_status=_int(end.get("exit_status")),
        tool_calls=p["tool_calls"],
        execs=p["execs"] + p["extra"] + p.get("waiting", 0),
        survivors=_int(end.get("survivors")),
        relayed=p["relayed"],
        traced=p["traced"],
        supervised=bool(p["start"]),
        ended=bool(p["end"]),
        running=bool(p["start"]) and not p["end"] and _alive(start, boot),
        severity=severity,
        cause=str(end.get("cause") or ""),
        reason=str(end.get("reason") or ""),
    )


def list_sessions(loc: Locations) -> list[SessionSummary]:
    """Every session in the log, newest first."""
    if not loc.log_dir.is_dir():
        raise InputError(f"no exec log at {loc.log_dir} (run `mcpshim install` first)")
    # in a sealed log the stored index is not taken as it is (log.sessionindex)
    index = sessionindex.update(loc, trust=not sessionindex.holds_seal(loc))
    if index is None:
        raise InputError(f"the session index in {loc.index_dir} stayed locked; try again")
    seen = marks.last_severity(marks.load_reviews(loc))
    boot = current_boot_id()
    out = [_summary(sid, p, seen.get(sid), boot) for sid, p in index.merged().items()]
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    out.sort(key=lambda s: (s.start or epoch, s.id), reverse=True)
    return out


def no_such_session(loc: Locations, session: str) -> InputError:
    return InputError(
        f"no such session {session!r}: no records of it in {loc.log_dir} "
        "(`mcpshim sessions` lists them)"
    )


def resolve_session(loc: Locations, text: str, relayed: bool = False) -> str:
    """The session id `text` names: `last` (the newest), an id, or a unique prefix of one.

    `relayed`: the command reads tool calls (approve, report, export otlp), so `last` is the
    newest session run with --mcp."""
    found = list_sessions(loc)
    if text == LAST:
        pool = [s for s in found if s.relayed] if relayed else found
        if not pool:
            what = "no session run with --mcp" if relayed else "no sessions"
            raise InputError(f"{what} in the log at {loc.log_dir}")
        return pool[0].id
    ids = [s.id for s in found]
    if text in ids:
        return text
    matches = [i for i in ids if i.startswith(text)] if text else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise UsageError(f"session {text!r} is ambiguous: {len(matches)} sessions ({shown})")
    raise no_such_session(loc, text)
