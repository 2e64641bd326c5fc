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

import errno
import os
import time

from mcpshim.base.flock import take

TYPE_CHECKING = False
if TYPE_CHECKING:  # (what `run` sets up before its server starts loads neither)
    from mcpshim.log.eventlog import LogPlace

    StrPath = str | os.PathLike[str]

__all__ = ["lock_dir", "log_mark", "nameless_file", "new_locked_dir", "sweep"]

_TMPFILE = getattr(os, "O_TMPFILE", 0)
_ABANDONED_S = 60.0  # a `new-*` directory older than this lost its run before its rename


def nameless_file(directory: StrPath) -> int:
    """A read-write descriptor of a new file in `directory` that no name leads to."""
    if _TMPFILE:
        try:
            return os.open(directory, _TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
        except OSError:
            pass
    # (a filesystem without O_TMPFILE: the name lives for the two calls below)
    import tempfile

    fd, name = tempfile.mkstemp(prefix=".out-", dir=directory)
    os.unlink(name)
    os.set_inheritable(fd, False)
    return fd


def lock_dir(directory: StrPath) -> int:
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


def new_locked_dir(base: StrPath) -> tuple[str, int]:
    """A new `run-*` directory under `base` (0700, as tempfile.mkdtemp makes one), and the
    lock this session holds on it."""
    while True:
        name = os.urandom(6).hex()  # (tempfile: 5 ms of imports before the server starts)
        made = os.path.join(base, "new-" + name)
        try:
            os.mkdir(made, 0o700)
            break
        except FileExistsError:
            continue
    try:
        fd = lock_dir(made)
    except OSError:
        os.rmdir(made)
        raise
    final = os.path.join(base, "run-" + name)
    try:
        os.rename(made, final)  # the lock is the directory's: it holds under the new name
    except OSError:
        os.close(fd)
        os.rmdir(made)
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


def sweep(base: StrPath) -> list[str]:
    """Remove every `run-*` directory under `base` that no live session holds, and `new-*`
    ones long abandoned; their names."""
    gone: list[str] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return gone
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        if (entry.name.startswith("run-") or _abandoned(entry)) and _remove_unheld(entry.path):
            gone.append(entry.name)
    return gone


def _remove_unheld(path: str) -> bool:
    """Remove the directory unless a live session holds it; whether it went."""
    from shutil import rmtree  # (there is something to remove: rarely, before a server starts)

    try:
        fd = lock_dir(path)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False  # a live session's
        rmtree(path, ignore_errors=True)  # unreadable: not in use
        return True
    try:
        rmtree(path, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def log_mark(loc: LogPlace) -> tuple[int, int] | None:
    try:
        st = os.stat(loc.log_file)
    except OSError:
        return None
    return st.st_ino, st.st_size
