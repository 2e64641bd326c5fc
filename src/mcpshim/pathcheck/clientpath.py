"""The PATH wrap-config writes: the shim dir, then the PATH the client would pass.

A client hands a stdio server its own environment's PATH unless env.PATH is set, and which
PATH that is depends on how the client was started (docs/recipes.md has the table):

- Claude Desktop on macOS is started by launchd: `/usr/bin:/bin:/usr/sbin:/sbin`, so a bare
  `npx` from Homebrew or nvm is not found unless env.PATH names its directory;
- Claude Code is started from a shell and passes that shell's PATH;
- Cursor and VS Code resolve the user's login-shell environment when they start and pass it;
- Claude Desktop on Linux passes the desktop session's PATH (systemd's user environment).

Writing the whole PATH of the shell wrap-config happens to run in would freeze into the
config whatever that shell had at that moment: an activated virtualenv, `./node_modules/.bin`,
a temporary directory. Instead the base is the client's PATH (for the shell-started clients,
the shell's PATH with relative and empty entries dropped), the directories of the servers'
bare commands are added when the base would not find them, duplicates go, and the shim dir
comes first. What lint-path would still flag in it is returned as warnings.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mcpshim.pathcheck.launch import resolve

__all__ = ["LAUNCHD_PATH", "ClientPath", "client_base", "compose"]

LAUNCHD_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"


@dataclass(frozen=True)
class ClientPath:
    value: str  # what env.PATH becomes: the shim dir first
    source: str  # where the base came from, said in wrap-config's report
    added: tuple[str, ...]  # directories added so bare commands still resolve


def client_base(client: str, env_path: str, platform: str = sys.platform) -> tuple[str, str]:
    """(PATH, where it comes from): what the client passes a server with no env.PATH."""
    if client == "claude-desktop" and platform == "darwin":
        return LAUNCHD_PATH, "launchd's PATH (Claude Desktop on macOS)"
    kept = [e for e in env_path.split(":") if os.path.isabs(e)]
    return ":".join(kept), "this shell's PATH, absolute entries only (the client passes its own)"


def _dedup(entries: Iterable[str], skip: str) -> list[str]:
    seen = {skip.rstrip("/") or "/"}
    out = []
    for e in entries:
        norm = e.rstrip("/") or "/"
        if e and norm not in seen:
            seen.add(norm)
            out.append(e)
    return out


def compose(
    shim_dir: str, base: str, source: str, commands: Sequence[str], env_path: str
) -> ClientPath:
    """The shim dir, then `base` deduplicated, then the directory each bare command resolves
    to on `env_path` when `base` does not find it."""
    entries = _dedup(base.split(":"), shim_dir)
    added: list[str] = []
    for cmd in commands:
        if not cmd or "/" in cmd or resolve(cmd, ":".join(entries), "/") is not None:
            continue
        found = resolve(cmd, env_path, "/")
        if found is not None and os.path.isabs(found):
            d = os.path.dirname(found)
            if d not in entries:
                entries.append(d)
                added.append(d)
    return ClientPath(":".join([shim_dir, *entries]), source, tuple(added))
