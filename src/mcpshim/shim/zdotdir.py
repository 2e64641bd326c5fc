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

import os

from mcpshim.base.safewrite import make_private_dir, write_file

TYPE_CHECKING = False
if TYPE_CHECKING:  # (not loaded here: `run` writes these before its server starts)
    from pathlib import Path

__all__ = ["FILES", "USER_ZDOTDIR_ENV", "ensure", "quote", "render", "zdotdir_of"]

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


_SAFE = frozenset("@%+=:,./-_")  # shlex.quote's unquoted characters beside letters and digits


def quote(s: str) -> str:
    """shlex.quote's answer (a test holds the two to it), without the re it loads."""
    if not s:
        return "''"
    if all((c.isascii() and c.isalnum()) or c in _SAFE for c in s):
        return s
    return "'" + s.replace("'", "'\"'\"'") + "'"


def zdotdir_of(shim_dir: str | Path) -> str:
    """Where the files live: inside the shim directory (not an executable, never on PATH
    lookups: a directory)."""
    return os.path.join(shim_dir, ".zsh")


def render(shim_dir: str | Path, name: str) -> str:
    return _TEMPLATE.format(
        mark=_MARK,
        name=name,
        user=USER_ZDOTDIR_ENV,
        here=quote(zdotdir_of(shim_dir)),
        shims=quote(os.fspath(shim_dir)),
    )


def ensure(shim_dir: str | Path) -> str | None:
    """The ZDOTDIR for sessions using the shims in shim_dir, its files written when missing
    or different; None when there are no shims or the files cannot be written."""
    if not os.path.isdir(shim_dir):
        return None
    here = zdotdir_of(shim_dir)
    try:
        make_private_dir(here)
        for name in FILES:
            data = render(shim_dir, name).encode()
            write_file(os.path.join(here, name), data, 0o600, unchanged_ok=True)
    except OSError:
        return None
    return here
