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
the shell's PATH with relative and empty entries dropped, and without what activating an
environment put there: the virtualenv of VIRTUAL_ENV or of this mcpshim, a conda env other
than base), the directories of the servers' bare commands are added when the base would
not find them (never one of those environments'), duplicates go, and the shim dir comes
first. What lint-path would still flag in it is returned as warnings.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from mcpshim.pathcheck.launch import resolve

__all__ = ["LAUNCHD_PATH", "ClientPath", "activated", "client_base", "compose"]

LAUNCHD_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"


@dataclass(frozen=True)
class ClientPath:
    value: str  # what env.PATH becomes: the shim dir first
    source: str  # where the base came from, said in wrap-config's report
    added: tuple[str, ...]  # directories added so bare commands still resolve
    left_out: tuple[str, ...] = ()  # the shell's activated environments, and why each


def _norm(entry: str) -> str:
    return os.path.normpath(entry) if entry else entry


def activated(environ: Mapping[str, str], prefix: str = sys.prefix) -> dict[str, str]:
    """The bin directories that activating an environment put on this shell's PATH (a
    client started elsewhere does not have them) -> what each is."""
    out: dict[str, str] = {}
    venv = environ.get("VIRTUAL_ENV", "")
    if os.path.isabs(venv):
        out[_norm(os.path.join(venv, "bin"))] = f"the active virtualenv {venv}"
    if prefix != sys.base_prefix:
        out.setdefault(_norm(os.path.join(prefix, "bin")), f"mcpshim's own virtualenv {prefix}")
    conda = environ.get("CONDA_PREFIX", "")
    if os.path.isabs(conda) and environ.get("CONDA_DEFAULT_ENV", "base") != "base":
        out.setdefault(_norm(os.path.join(conda, "bin")), f"the active conda env {conda}")
    return out


def client_base(
    client: str,
    env_path: str,
    platform: str = sys.platform,
    skip: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """(PATH, where it comes from): what the client passes a server with no env.PATH.
    `skip`: directories of activated environments (`activated`), never passed on."""
    if client == "claude-desktop" and platform == "darwin":
        return LAUNCHD_PATH, "launchd's PATH (Claude Desktop on macOS)"
    drop = skip or {}
    entries = [e for e in env_path.split(":") if os.path.isabs(e)]
    kept = [e for e in entries if _norm(e) not in drop]
    source = "this shell's PATH, absolute entries only"
    if len(kept) < len(entries):
        source += ", less its activated environments"
    return ":".join(kept), source + " (the client passes its own)"


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
    shim_dir: str,
    base: str,
    source: str,
    commands: Sequence[str],
    env_path: str,
    skip: Mapping[str, str] | None = None,
) -> ClientPath:
    """The shim dir, then `base` deduplicated, then the directory each bare command resolves
    to on `env_path` when `base` does not find it (not one of `skip`, the activated
    environments: a command found only there is said, in `left_out`)."""
    drop = skip or {}
    entries = _dedup(base.split(":"), shim_dir)
    added: list[str] = []
    left: dict[str, str] = {
        e: drop[_norm(e)] for e in env_path.split(":") if e and _norm(e) in drop
    }
    for cmd in commands:
        if not cmd or "/" in cmd or resolve(cmd, ":".join(entries), "/") is not None:
            continue
        found = resolve(cmd, env_path, "/")
        if found is not None and os.path.isabs(found):
            d = os.path.dirname(found)
            if _norm(d) in drop:
                left[d] = f"{drop[_norm(d)]}; {cmd} is found only there: write its absolute path"
            elif d not in entries:
                entries.append(d)
                added.append(d)
    return ClientPath(
        ":".join([shim_dir, *entries]),
        source,
        tuple(added),
        tuple(f"{d} ({why})" for d, why in left.items()),
    )
