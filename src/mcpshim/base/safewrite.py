"""Writing a user's file without ever leaving it half-written or clobbering a backup.

A temporary file in the same directory gets the data, is fsync'ed, takes the old file's
mode (and owner, when running as root), and is then renamed over the target: a reader sees
the old bytes or the new ones, never a mix. A backup is created with link(2), which fails
when the name exists, so an existing backup is never replaced.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["create_exclusive", "make_private_dir", "replace_atomically"]


def _staged(directory: Path, name: str, data: bytes, like: os.stat_result) -> str:
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(like.st_mode))
        if os.geteuid() == 0:
            os.chown(tmp, like.st_uid, like.st_gid)
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def replace_atomically(path: Path, data: bytes, like: os.stat_result) -> None:
    """Replace the file `path` points at (through symlinks) with `data`, keeping its mode."""
    real = Path(os.path.realpath(path))
    tmp = _staged(real.parent, real.name, data, like)
    try:
        os.replace(tmp, real)
    except BaseException:
        os.unlink(tmp)
        raise


def create_exclusive(path: Path, data: bytes, like: os.stat_result) -> None:
    """Create `path` with `data` complete, or raise FileExistsError and leave it alone."""
    tmp = _staged(path.parent, path.name, data, like)
    try:
        os.link(tmp, path)
    finally:
        os.unlink(tmp)


def make_private_dir(path: Path) -> None:
    """mkdir -p where every directory created is 0700 (Path.mkdir gives its mode to the last
    one only): what mcpshim keeps is the user's alone."""
    missing: list[Path] = []
    p = Path(os.path.abspath(path))
    while not p.exists() and not p.is_symlink():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            d.mkdir(mode=0o700)
