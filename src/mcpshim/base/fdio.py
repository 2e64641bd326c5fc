"""Reads and writes on fds that someone else may have made non-blocking, and opening a
file that someone may have swapped for a FIFO.

O_NONBLOCK belongs to the open file description, which a client may share and set: a read
or write that would block then waits in poll() instead of being taken for an end of stream
or a short write.
"""

from __future__ import annotations

import os
import select
import stat

from mcpshim.errors import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:  # (not loaded here: `run` writes with write_all before its server starts)
    from collections.abc import Callable
    from pathlib import Path
    from typing import BinaryIO

__all__ = [
    "open_regular",
    "open_regular_fd",
    "read_exactly",
    "read_regular",
    "read_some",
    "wait_for",
    "write_all",
]


def wait_for(fd: int, event: int, timeout: float | None = None) -> bool:
    """poll(2) one fd (any fd number, unlike select); False when `timeout` seconds passed."""
    poller = select.poll()
    poller.register(fd, event)
    return bool(poller.poll(None if timeout is None else max(0, int(timeout * 1000))))


def read_some(fd: int, count: int) -> bytes:
    """os.read that waits when the fd is non-blocking; b'' only at EOF."""
    while True:
        try:
            return os.read(fd, count)
        except BlockingIOError:
            wait_for(fd, select.POLLIN)


def read_exactly(fd: int, count: int) -> bytes:
    """`count` bytes that are known to be there (in our own pipe)."""
    parts = []
    while count > 0:
        part = read_some(fd, count)
        if not part:
            break
        parts.append(part)
        count -= len(part)
    return b"".join(parts)


def write_all(fd: int, data: bytes, progress: Callable[[], None] | None = None) -> None:
    """Write all of `data`, waiting for room when the fd is non-blocking; `progress` is
    called after each write that took some of it."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            wait_for(fd, select.POLLOUT)
            continue
        if progress is not None:
            progress()


def open_regular_fd(path: Path) -> int:
    """Open a log file for reading without blocking on a FIFO put in its place: anything but
    a regular file is refused (InputError). FileNotFoundError passes through."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{path} is not a regular file; not reading it")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: Path) -> BinaryIO:
    """open_regular_fd as a file object."""
    return os.fdopen(open_regular_fd(path), "rb")


def read_regular(path: Path) -> bytes:
    """A file mcpshim reads (a lock, a policy, a baseline, a config, a backup, its own
    state), whole: anything but a regular file is refused (InputError), so a FIFO in its
    place never blocks a command for good. FileNotFoundError and other OSErrors pass."""
    with open_regular(path) as fh:
        return fh.read()
