"""Sessions of `mcpshim run`: ids, the start and end records, the family's environment.

A session id is what ties a family together across record kinds: the supervisor exports it
as MCPSHIM_SESSION, every shim copies it into its exec record, and every event the
supervisor writes carries it. Event kinds and payload keys here are a schema that tree and
review read; keep them stable.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from mcpshim.supervise.childenv import SESSION_ENV, child_environment, new_session_id

__all__ = [
    "SESSION_ENV",
    "SessionStart",
    "child_environment",
    "end_payload",
    "new_session_id",
    "start_payload",
    "utc_now",
]


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _user(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


@dataclass(frozen=True)
class SessionStart:
    """What the supervisor knows once the command has been started."""

    session: str
    name: str
    command: tuple[bytes, ...]
    cwd: bytes
    child_pid: int
    child_start: int | None
    boot_id: str
    path: str
    env_names: tuple[str, ...]
    subreaper: bool
    trace: str = ""  # "strace" (traced), "unavailable" (auto fell back) or "off"
    zdotdir: str = ""  # the ZDOTDIR route's directory, "" when off
    #: run --contain: the ruleset (sandbox.plan's payload), or why there is none
    contain: Mapping[str, Any] | None = None


def start_payload(s: SessionStart) -> dict[str, Any]:
    # The redaction table and the record views: written once the command runs, not before.
    from mcpshim.base.display import b64_fields, json_text
    from mcpshim.log.logview import argv_fields
    from mcpshim.log.redact import credential_env_names

    uid = os.getuid()
    payload: dict[str, Any] = {
        "session": s.session,
        "time": utc_now(),
        "name": s.name,
        "cwd": json_text(s.cwd),
        "user": _user(uid),
        "uid": uid,
        "pid": os.getpid(),
        "child_pid": s.child_pid,
        "child_start": s.child_start,
        "boot_id": s.boot_id,
        "path": s.path,
        "credential_env": list(credential_env_names(s.env_names)),
        "subreaper": s.subreaper,
        "platform": sys.platform,
    }
    if s.trace:
        payload["trace"] = s.trace
    if s.zdotdir:
        payload["zdotdir"] = s.zdotdir
    if s.contain is not None:
        payload["contain"] = dict(s.contain)
    payload.update(argv_fields("command", s.command))
    payload.update(b64_fields({"cwd": s.cwd}))
    return payload


def end_payload(
    session: str,
    exit_status: int | None,
    duration_s: float,
    survivors: int,
    terminated: bool,
    cause: str = "",
) -> dict[str, Any]:
    """`cause`: why a session ended other than by its command exiting (`supervisor-lost`:
    `run` died, and its watcher ended the family; no exit status is known then)."""
    out: dict[str, Any] = {
        "session": session,
        "time": utc_now(),
        "exit_status": exit_status,
        "duration_s": round(duration_s, 3),
        "survivors": survivors,
        "terminated": terminated,
    }
    if cause:
        out["cause"] = cause
    return out
