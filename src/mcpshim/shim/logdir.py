"""Whether a directory may hold mcpshim's files, and the boot anchor install puts there.

The shims append to files under the log directory on every exec. If anyone but the user
could write there (or in a directory above it), they could swap `exec.log` for a symlink to
the user's `~/.bashrc`, or forge records. So install checks the way ssh's StrictModes does:
every directory from the root down must be owned by the user or root and not group- or
world-writable, unless it is sticky (like /tmp, where others cannot rename what is ours);
the log directory itself and everything mcpshim keeps in it must be the user's, writable by
no one else, and hold no symlink. (Everything mcpshim creates there is 0700 or 0600.)
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from mcpshim.log.boot import write_boot_anchor
from mcpshim.paths import Locations

__all__ = ["dir_problem", "log_dir_problem", "write_boot_anchor"]  # (the last: log.boot)

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
#: what mcpshim keeps in the log directory (rotated segments are exec.log.NNNNNN)
_SUBDIRS = ("spill", "boot", "parents")


def _chain(path: Path) -> Iterator[Path]:
    """`path` and every directory above it, as written and as resolved."""
    seen: set[Path] = set()
    for p in (Path(os.path.abspath(path)), Path(os.path.realpath(path))):
        for q in (p, *p.parents):
            if q not in seen:
                seen.add(q)
                yield q


def _whose(st: os.stat_result) -> str:
    return f"owned by uid {st.st_uid}"


def dir_problem(path: Path, uid: int | None = None) -> str | None:
    """Why `path` (existing or to be created) is not a safe place for mcpshim's files: an
    existing directory in its chain that another user owns or may write. None when safe."""
    uid = os.geteuid() if uid is None else uid
    for d in _chain(path):
        try:
            st = os.stat(d)
        except FileNotFoundError:
            continue  # to be created by install, 0700
        except OSError as exc:
            return f"{d} cannot be checked: {exc.strerror}"
        if not stat.S_ISDIR(st.st_mode):
            continue  # install will fail on it with its own message
        own = st.st_uid == uid
        if not own and st.st_uid != 0:
            return f"{d} is {_whose(st)}, neither you nor root"
        if st.st_mode & _OTHERS_WRITE and not st.st_mode & stat.S_ISVTX:
            return f"{d} is group- or world-writable"
    return None


def _entry_problem(p: Path, uid: int, want_dir: bool) -> str | None:
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return f"{p} is a symlink"
    if want_dir != stat.S_ISDIR(st.st_mode) or not (want_dir or stat.S_ISREG(st.st_mode)):
        return f"{p} is not a {'directory' if want_dir else 'regular file'}"
    if st.st_uid != uid:
        return f"{p} is {_whose(st)}, not yours"
    if st.st_mode & _OTHERS_WRITE:
        return f"{p} is group- or world-writable"
    return None


def log_dir_problem(loc: Locations, uid: int | None = None) -> str | None:
    """Why the log directory cannot be trusted with the shims' writes, or None."""
    uid = os.geteuid() if uid is None else uid
    problem = dir_problem(loc.log_dir, uid)
    if problem or not loc.log_dir.exists():
        return problem
    problem = _entry_problem(loc.log_dir, uid, want_dir=True)
    if problem:
        return problem
    for entry in sorted(loc.log_dir.iterdir()):
        name = entry.name
        if name in _SUBDIRS:
            problem = _entry_problem(entry, uid, want_dir=True)
            for inner in [] if problem else sorted(entry.iterdir()):
                problem = problem or _entry_problem(inner, uid, want_dir=False)
        elif name == "exec.log" or name.startswith("exec.log."):
            problem = _entry_problem(entry, uid, want_dir=False)
        if problem:
            return problem
    return None
