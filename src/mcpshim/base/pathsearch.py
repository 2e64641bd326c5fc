"""A bare command name looked up on a PATH, on os alone: `run` finds its command and
strace with it before its server starts."""

from __future__ import annotations

import os

__all__ = ["which"]


def which(cmd: str, path: str) -> str | None:
    """`shutil.which(cmd, path=path)` for a bare name on POSIX (a test holds the two to
    the same answers): the first PATH entry holding an executable file of that name, ""
    entries being the working directory. shutil brings re, fnmatch, bz2 and lzma, 5 ms
    before the server starts."""
    if not path:
        return None  # (PATH="" names no directory; ":" names the working one)
    seen: set[str] = set()
    for d in path.split(os.pathsep):
        key = os.path.normcase(d)
        if key in seen:
            continue
        seen.add(key)
        name = os.path.join(d, cmd)
        if os.path.exists(name) and os.access(name, os.X_OK) and not os.path.isdir(name):
            return name
    return None
