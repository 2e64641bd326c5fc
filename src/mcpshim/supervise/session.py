"""Sessions of `mcpshim run`: ids, the start and end records, and a tail of the shared log.

A session id is what ties a family together across record kinds: the supervisor exports it
as MCPSHIM_SESSION, every shim copies it into its exec record, and every event the
supervisor writes carries it. Event kinds and payload keys here are a schema that tree and
review read; keep them stable.
"""

from __future__ import annotations

import io
import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mcpshim.base.display import b64_fields, json_text
from mcpshim.log import execlog
from mcpshim.log.execlog import ExecRecord, LogProblem
from mcpshim.log.logview import argv_fields
from mcpshim.log.redact import credential_env_names
from mcpshim.paths import Locations
from mcpshim.shim.zdotdir import USER_ZDOTDIR_ENV

__all__ = [
    "SESSION_ENV",
    "LogTail",
    "SessionStart",
    "child_environment",
    "end_payload",
    "new_session_id",
    "start_payload",
    "utc_now",
]

SESSION_ENV = "MCPSHIM_SESSION"


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat()


def new_session_id() -> str:
    """Sortable by start time and unguessable enough that two sessions never collide."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(5)}"


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
    session: str, exit_status: int, duration_s: float, survivors: int, terminated: bool
) -> dict[str, Any]:
    return {
        "session": session,
        "time": utc_now(),
        "exit_status": exit_status,
        "duration_s": round(duration_s, 3),
        "survivors": survivors,
        "terminated": terminated,
    }


class LogTail:
    """New shim records since the session began, read incrementally from the live log.

    The live log is opened once and read from where the last call stopped; a rotation
    (rename) is noticed by inode, the renamed segment is drained through the open file and
    the new live log is read from its start. Only whole records are consumed.
    """

    def __init__(self, loc: Locations) -> None:
        self._loc = loc
        self._fh: io.BufferedReader | None = None
        self._carry = b""
        self.problems: list[LogProblem] = []
        self._open(at_end=True)

    def _open(self, at_end: bool) -> None:
        try:
            fh = self._loc.log_file.open("rb")
        except OSError:
            self._fh = None
            return
        if at_end:
            fh.seek(0, os.SEEK_END)
        self._fh = fh
        self._carry = b""

    def _rotated(self) -> bool:
        try:
            live = os.stat(self._loc.log_file)
        except OSError:
            return False
        if self._fh is None:
            return True
        own = os.fstat(self._fh.fileno())
        return (live.st_dev, live.st_ino) != (own.st_dev, own.st_ino)

    def _drain(self) -> list[ExecRecord]:
        if self._fh is None:
            return []
        data = self._carry + self._fh.read()
        end = data.rfind(b"\0\n")
        if end < 0:
            self._carry = data
            return []
        whole, self._carry = data[: end + 2], data[end + 2 :]
        recs = execlog.read_stream(
            io.BytesIO(whole), "exec.log", self._loc.spill_dir, self.problems
        )
        return [r for r in recs if isinstance(r, ExecRecord)]

    def poll(self) -> list[ExecRecord]:
        out = self._drain()
        if self._rotated():
            out += self._drain()
            self.close()
            self._open(at_end=False)
            out += self._drain()
        return out

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def child_environment(
    base: Mapping[str, str], shim_dir: Path, session: str, zdotdir: Path | None = None
) -> tuple[dict[str, str], str]:
    """The command's environment: the caller's, plus the session id and shims first on PATH;
    with `zdotdir`, zsh's ZDOTDIR points there and the caller's own travels in
    MCPSHIM_USER_ZDOTDIR (see shim.zdotdir)."""
    env = dict(base)
    shim = str(shim_dir)
    rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p != shim]
    env["PATH"] = os.pathsep.join([shim, *rest])
    env[SESSION_ENV] = session
    if zdotdir is not None and env.get("ZDOTDIR") != str(zdotdir):  # not a nested run
        if "ZDOTDIR" in env:
            env[USER_ZDOTDIR_ENV] = env["ZDOTDIR"]
        else:
            env.pop(USER_ZDOTDIR_ENV, None)
        env["ZDOTDIR"] = str(zdotdir)
    return env, env["PATH"]
