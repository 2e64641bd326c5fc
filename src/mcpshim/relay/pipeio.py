"""Moving bytes between fds without holding them: splice(2) and tee(2).

The relay child (relay.child) waits for a peer's bytes in tee, which duplicates them into an
empty pipe of its own (page references, no copy) as it returns; splice then pushes the
bytes on, and moves the duplicate into the copy channel. Python has os.splice but no tee,
so tee comes from libc through ctypes (a foreign call releases the interpreter lock, as
os.splice does).

The fds the relay reads and writes are the client's and may be non-blocking: a splice that
would block waits in poll() (base.fdio) instead of being taken for an end of stream.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import select
from typing import Any

from mcpshim.base.fdio import wait_for

__all__ = [
    "SPLICE_OK",
    "grow",
    "splice_all",
    "splice_now",
    "splice_some",
    "tee_wait",
]


def _libc_tee() -> Any:
    if not hasattr(os, "splice"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # this process's own symbols: libc's
        fn = libc.tee
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint]
    fn.restype = ctypes.c_ssize_t
    return fn


_TEE = _libc_tee()
#: splice and tee are both there (Linux): the relay child may forward without copying.
SPLICE_OK = _TEE is not None
_NONBLOCK = getattr(os, "SPLICE_F_NONBLOCK", 2)


def tee_wait(src: int, dst: int, count: int) -> int:
    """tee(2) that waits for bytes in pipe `src` (and for room in pipe `dst`, which callers
    keep empty): how many were duplicated, 0 at EOF. The duplicate exists as the call that
    waited returns: nothing runs in between. A `src` someone made non-blocking is waited
    for with poll()."""
    if _TEE is None:
        raise OSError(errno.ENOSYS, "tee(2) is not available")
    while True:
        n = int(_TEE(src, dst, count, 0))
        if n >= 0:
            return n
        err = ctypes.get_errno()
        if err == errno.EAGAIN:
            wait_for(src, select.POLLIN)
        elif err != errno.EINTR:
            raise OSError(err, os.strerror(err))


def splice_now(src: int, dst: int, count: int) -> int:
    """splice(2) what fits now, never waiting: 0 when `dst` is full."""
    try:
        return os.splice(src, dst, count, flags=_NONBLOCK)
    except BlockingIOError:
        return 0


def splice_some(src: int, dst: int, count: int) -> int:
    """splice(2) at least one byte (waiting for one to be there and for room), or 0 at EOF."""
    while True:
        try:
            return os.splice(src, dst, count)
        except BlockingIOError:
            wait_for(src, select.POLLIN)
            wait_for(dst, select.POLLOUT)


def splice_all(src: int, dst: int, count: int) -> tuple[int, OSError | None]:
    """Move exactly `count` bytes: how many moved, and the error that stopped it early
    (EINVAL: `dst` takes no splice, what did not move is still in `src`)."""
    moved = 0
    while moved < count:
        try:
            n = splice_some(src, dst, count - moved)
        except OSError as exc:
            return moved, exc
        if not n:
            return moved, OSError(errno.EPIPE, "the source ended early")
        moved += n
    return moved, None


def grow(fd: int, size: int) -> None:
    """Make pipe `fd` hold `size` bytes, where it is a pipe and the user's limit allows."""
    if fd >= 0:
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)  # type: ignore[attr-defined, unused-ignore]
