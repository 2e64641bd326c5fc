"""Metadata changes (chmod, chown, utime) from strace's lines: which file, what, the result.

Landlock does not refuse them: a family contained with `--contain-write DIR` can still
make a file outside DIR executable, give it away or back-date it. So a contained session
with write rules traces these calls too (META_SYSCALLS, only then: an ordinary session pays
no stop for them) and records each change outside the write directories as a fact
(`trace-file`). A name strace does not know on this machine (`chmod` on aarch64) is
asked for with `?`, which strace skips quietly.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

__all__ = ["META_CALLS", "META_SYSCALLS", "MetaCall", "MetaFact", "parse_meta"]

#: syscall -> (what it changes, whether it takes a directory fd first, whether its first
#: argument is an fd rather than a path)
_CALLS = {
    b"chmod": ("mode", False, False),
    b"fchmod": ("mode", False, True),
    b"fchmodat": ("mode", True, False),
    b"fchmodat2": ("mode", True, False),
    b"chown": ("owner", False, False),
    b"lchown": ("owner", False, False),
    b"fchown": ("owner", False, True),
    b"fchownat": ("owner", True, False),
    b"utime": ("times", False, False),
    b"utimes": ("times", False, False),
    b"utimensat": ("times", True, False),
    b"futimesat": ("times", True, False),
}
META_SYSCALLS = tuple("?" + n.decode() for n in _CALLS)  # `?`: unknown here is no error
META_CALLS = tuple(n + b"(" for n in _CALLS)
_STR = re.compile(rb'"((?:\\x[0-9a-f]{2})*)"')
_FD = re.compile(rb"(AT_FDCWD|-?\d+)(?:<((?:\\x[0-9a-f]{2})*)>)?")
_RESULT = re.compile(rb"\) += (-?\d+)(?: ([A-Z][A-Z0-9_]*))?")


@dataclass(frozen=True, slots=True)
class MetaCall:
    call: str  # the syscall
    what: str  # mode | owner | times
    path: bytes | None  # as named, under the directory strace named; None when unknown
    detail: str  # the new mode (octal as strace prints it) or uid:gid; "" for times
    result: str  # "ok" or the errno name


@dataclass(frozen=True, slots=True)
class MetaFact:
    """A metadata call of one traced process, its path made absolute by the process's cwd
    where strace named no directory (None: not known)."""

    time: float
    pid: int
    tid: int
    call: MetaCall
    path: bytes | None


def _unhex(s: bytes) -> bytes:
    return bytes.fromhex(s.replace(b"\\x", b"").decode("ascii"))


def _join(base: bytes | None, path: bytes) -> bytes:
    """`path` under the directory strace named; relative still when it named none (the
    caller's cwd then decides: trace.strace joins it)."""
    if path.startswith(b"/") or base is None:
        return os.path.normpath(path)
    return os.path.normpath(os.path.join(base, path))


def _arg(rest: bytes, pos: int) -> tuple[bytes, int]:
    """The argument text at pos and where the next begins (strings hold only \\x escapes,
    so a comma is structure)."""
    end = rest.find(b", ", pos)
    close = rest.rfind(b") = ")
    stop = end if 0 <= end < close else close
    return rest[pos:stop], stop + 2


def parse_meta(rest: bytes) -> MetaCall | None:
    """One line of a metadata call (after its timestamp); None for any other line or one
    whose shape is not understood."""
    open_ = rest.find(b"(")
    spec = _CALLS.get(rest[:open_])
    m = _RESULT.search(rest)
    if spec is None or m is None:
        return None
    what, at, fd_first = spec
    result = "ok" if int(m.group(1)) >= 0 else (m.group(2) or b"EUNKNOWN").decode("ascii")
    pos = open_ + 1
    base: bytes | None = None
    if at or fd_first:
        fd = _FD.match(rest, pos)
        if fd is None:
            return None
        base = _unhex(fd.group(2)) if fd.group(2) is not None else None
        pos = fd.end() + 2
    if fd_first:
        path = base
    else:
        s = _STR.match(rest, pos)
        if s is None:  # utimensat(fd, NULL, ...): the fd's own file
            if not rest.startswith(b"NULL", pos):
                return None
            path, pos = base, pos + len(b"NULL, ")
        else:
            path, pos = _join(base, _unhex(s.group(1))), s.end() + 2
    detail = ""
    if what == "mode":
        detail = _arg(rest, pos)[0].decode("ascii", "replace")
    elif what == "owner":
        uid, pos = _arg(rest, pos)
        gid = _arg(rest, pos)[0]
        detail = f"{uid.decode('ascii', 'replace')}:{gid.decode('ascii', 'replace')}"
    return MetaCall(rest[:open_].decode("ascii"), what, path, detail, result)
