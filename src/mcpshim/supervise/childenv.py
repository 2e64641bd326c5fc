"""What a session's command starts with: the session's id and its environment (shims first
on PATH, the id in MCPSHIM_SESSION, zsh's ZDOTDIR route). Made before the server starts
(supervise.launch), on os and time alone."""

from __future__ import annotations

import os
import time

from mcpshim.shim.zdotdir import USER_ZDOTDIR_ENV

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = ["SESSION_ENV", "child_environment", "new_session_id"]

SESSION_ENV = "MCPSHIM_SESSION"


def new_session_id() -> str:
    """Sortable by start time and unguessable enough that two sessions never collide."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    # os.urandom is what secrets.token_hex reads; `secrets` would load hmac and hashlib
    # (5 ms) before the server starts
    return f"{stamp}-{os.urandom(5).hex()}"


def child_environment(
    base: Mapping[str, str], shim_dir: str | Path, session: str, zdotdir: str | None = None
) -> tuple[dict[str, str], str]:
    """The command's environment: the caller's, plus the session id and shims first on PATH;
    with `zdotdir`, zsh's ZDOTDIR points there and the caller's own travels in
    MCPSHIM_USER_ZDOTDIR (see shim.zdotdir)."""
    env = dict(base)
    shim = str(shim_dir)
    rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p != shim]
    env["PATH"] = os.pathsep.join([shim, *rest])
    env[SESSION_ENV] = session
    if zdotdir is not None and env.get("ZDOTDIR") != zdotdir:  # not a nested run
        if "ZDOTDIR" in env:
            env[USER_ZDOTDIR_ENV] = env["ZDOTDIR"]
        else:
            env.pop(USER_ZDOTDIR_ENV, None)
        env["ZDOTDIR"] = zdotdir
    return env, env["PATH"]
