"""A traced session's directory and output file, before anything is traced: what `run`
sets up before its server starts (trace.store turns the output into records, later).

strace's sanitized lines still hold every argument as the traced command got it, tokens
included, so they never go to a file with a name: `nameless_file` makes one (O_TMPFILE,
or created and unlinked at once). Each session's directory (`trace/run-*`, for strace's
FIFO) is locked by the session while it may use it (`lock_dir`); `sweep` removes every
directory no live session locks (see trace.store). A directory is made as `new-*`, locked,
then renamed `run-*` (`new_locked_dir`): another run's sweep never meets one of them
created and not yet locked (two runs starting together lost a directory that way).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import time
from pathlib import Path

from mcpshim.base.flock import take
from mcpshim.paths import Locations

__all__ = ["lock_dir", "log_mark", "nameless_file", "new_locked_dir", "sweep"]

_TMPFILE = getattr(os, "O_TMPFILE", 0)
_ABANDONED_S = 60.0  # a `new-*` directory older than this lost its run before its rename


def nameless_file(directory: Path) -> int:
    """A read-write descriptor of a new file in `directory` that no name leads to."""
    if _TMPFILE:
        with contextlib.suppress(OSError):
            return os.open(directory, _TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    # (a filesystem without O_TMPFILE: the name lives for the two calls below)
    fd, name = tempfile.mkstemp(prefix=".out-", dir=directory)
    os.unlink(name)
    os.set_inheritable(fd, False)
    return fd


def lock_dir(directory: Path) -> int:
    """Hold `directory` for this session (`sweep` leaves it alone while the lock holds)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        held = take(fd, 0)
    except OSError:
        os.close(fd)
        raise
    if not held:
        os.close(fd)
        raise BlockingIOError(errno.EWOULDBLOCK, "held by a live session", str(directory))
    return fd


def new_locked_dir(base: Path) -> tuple[Path, int]:
    """A new `run-*` directory under `base`, and the lock this session holds on it."""
    made = Path(tempfile.mkdtemp(prefix="new-", dir=base))
    try:
        fd = lock_dir(made)
    except OSError:
        shutil.rmtree(made, ignore_errors=True)
        raise
    final = made.with_name("run-" + made.name.removeprefix("new-"))
    try:
        os.rename(made, final)  # the lock is the directory's: it holds under the new name
    except OSError:
        os.close(fd)
        shutil.rmtree(made, ignore_errors=True)
        raise
    return final, fd


def _abandoned(entry: os.DirEntry[str]) -> bool:
    """A `new-*` directory left by a run that died before renaming it."""
    try:
        return entry.name.startswith("new-") and (
            time.time() - entry.stat(follow_symlinks=False).st_mtime > _ABANDONED_S
        )
    except OSError:
        return False


def sweep(base: Path) -> list[str]:
    """Remove every `run-*` directory under `base` that no live session holds, and `new-*`
    ones long abandoned; their names."""
    gone = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if not entry.is_dir(follow_symlinks=False):
                continue
            if not entry.name.startswith("run-") and not _abandoned(entry):
                continue
            try:
                fd = lock_dir(Path(entry.path))
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    continue  # a live session's
                shutil.rmtree(entry.path, ignore_errors=True)  # unreadable: not in use
                gone.append(entry.name)
                continue
            try:
                shutil.rmtree(entry.path, ignore_errors=True)
                gone.append(entry.name)
            finally:
                os.close(fd)
    return gone


def log_mark(loc: Locations) -> tuple[int, int] | None:
    try:
        st = loc.log_file.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size
