"""Advisory locks: flock(2) on a lock file, the one way mcpshim takes a lock.

flock belongs to the open file, so a lock is held through one descriptor and dropped
when it is closed (or the process dies: no stale lock outlives its holder). The lock file
is never deleted here, so flock(1) users (`flock exec.log.lock CMD`) and mcpshim agree on
it: a holder that unlinked it would let the next taker lock a new file while a waiter
still held the old one. (wrap-config's edit lock is the one that is unlinked, and it
takes the lock again when the name now leads elsewhere: `pathcheck/wrapfile`.)
"""

from __future__ import annotations

import errno
import fcntl
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # (not loaded here: `run` takes the log's lock before its server starts)
    from pathlib import Path
    from types import TracebackType

__all__ = ["FileLock", "LockTimeoutError", "open_lock", "take"]

_BUSY = (errno.EAGAIN, errno.EACCES)


class LockTimeoutError(TimeoutError):
    """The lock stayed held by someone else for the whole timeout (an OSError: exit 2)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(errno.ETIMEDOUT, "the lock stayed held by another process", str(path))


def open_lock(path: str | os.PathLike[str]) -> int:
    """A descriptor of the lock file, created 0600, never through a symlink."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    return os.open(path, flags, 0o600)


def take(fd: int, timeout: float, poll: float = 0.005) -> bool:
    """flock(fd, LOCK_EX), trying again every `poll` s for up to `timeout` s (0: once).

    False when it stayed held; another error (EBADF, ENOLCK) is raised. A descriptor
    that holds the lock already takes it again at once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in _BUSY:
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)


class FileLock:
    """`with FileLock(path, timeout):` holds the lock for the block (LockTimeoutError if it
    cannot). Not reentrant: a second FileLock on the same file in one process waits."""

    def __init__(self, path: str | os.PathLike[str], timeout: float, poll: float = 0.005) -> None:
        from pathlib import Path

        self.path: Path = Path(path)
        self.timeout, self.poll = timeout, poll
        self._fd = -1

    def __enter__(self) -> FileLock:
        fd = open_lock(self.path)
        try:
            if not take(fd, self.timeout, self.poll):
                raise LockTimeoutError(self.path)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)  # the only descriptor of this open file: the lock goes with it
