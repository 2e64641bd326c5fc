"""zsh startup files of mcpshim's own, so zsh login shells keep the shims first.

A login shell's profile often sets PATH from scratch: Debian's /etc/profile does, macOS's
/etc/zprofile runs path_helper, which moves the system directories ahead of everything
else. Every command of such a shell then misses its shim. zsh reads its per-user files
from $ZDOTDIR: `mcpshim run` points ZDOTDIR at a directory of files written here, each of
which reads the user's own file of that name (from the ZDOTDIR the user had, else HOME,
with ZDOTDIR set as the user had it while it runs), then puts the shim directory back in
front of PATH and ZDOTDIR back to this directory (so zsh reads the next file from here,
and a nested zsh takes the same route). zsh reads .zshenv, .zprofile, .zshrc and .zlogin
in that order, each after its /etc counterpart, so whatever a system file did to PATH is
undone by the user's file's successor here. The user's ZDOTDIR travels in
MCPSHIM_USER_ZDOTDIR (unset: the user had none).

bash has no such hook: a bash login shell reads /etc/profile whatever the environment
says. There only the trace sees what its commands run (and says why they missed a shim).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from mcpshim.base.safewrite import make_private_dir, write_file

__all__ = ["FILES", "USER_ZDOTDIR_ENV", "ensure", "render", "zdotdir_of"]

USER_ZDOTDIR_ENV = "MCPSHIM_USER_ZDOTDIR"
FILES = (".zshenv", ".zprofile", ".zshrc", ".zlogin", ".zlogout")
_MARK = "# mcpshim-zdotdir v1"

_TEMPLATE = """{mark} -- written by `mcpshim run`; rewritten when it differs. Do not edit.
# zsh reads this {name} because `mcpshim run` set ZDOTDIR: it reads your own {name}
# first (from your ZDOTDIR, else HOME), then keeps the mcpshim shims first on PATH.
if (( ${{+{user}}} )); then ZDOTDIR=${user}; else unset ZDOTDIR; fi
if [[ -f ${{ZDOTDIR:-$HOME}}/{name} ]]; then source ${{ZDOTDIR:-$HOME}}/{name}; fi
if (( ${{+ZDOTDIR}} )); then export {user}=$ZDOTDIR; else unset {user}; fi
export ZDOTDIR={here}
if [[ -d {shims} ]]; then path=({shims} ${{path:#${{(b):-{shims}}}}}); fi
"""


def zdotdir_of(shim_dir: Path) -> Path:
    """Where the files live: inside the shim directory (not an executable, never on PATH
    lookups: a directory)."""
    return shim_dir / ".zsh"


def render(shim_dir: Path, name: str) -> str:
    here = zdotdir_of(shim_dir)
    return _TEMPLATE.format(
        mark=_MARK,
        name=name,
        user=USER_ZDOTDIR_ENV,
        here=shlex.quote(str(here)),
        shims=shlex.quote(str(shim_dir)),
    )


def ensure(shim_dir: Path) -> Path | None:
    """The ZDOTDIR for sessions using the shims in shim_dir, its files written when missing
    or different; None when there are no shims or the files cannot be written."""
    if not shim_dir.is_dir():
        return None
    here = zdotdir_of(shim_dir)
    try:
        make_private_dir(here)
        for name in FILES:
            write_file(here / name, render(shim_dir, name).encode(), 0o600, unchanged_ok=True)
    except OSError:
        return None
    return here
