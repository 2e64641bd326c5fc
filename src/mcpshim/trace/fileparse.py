"""File calls from strace's lines: opens (which file, for what, with what outcome), and the
calls that put a file at a name (rename, link, symlink) or cut it (truncate).

Traced in every session that traces files (FILE_SYSCALLS: `run --trace-files`, or
--contain): each stops its caller, which is what it costs (docs/performance.md). Nothing of
a file's content is read; what a record keeps is decided by trace.filefacts against the
table of locations that matter (log.filetable). A name strace does not know on this
machine (`open` on aarch64) is asked for with `?`, which strace skips quietly.

With `-y` strace names the file a returned descriptor points at (`= 3</abs/path>`): the
path an open reached, symlinks resolved, whatever the call named.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

__all__ = ["FILE_CALLS", "FILE_SYSCALLS", "FileCall", "FileFact", "parse_file", "writes"]

#: syscall -> (directory fds before each path, how many paths, whether it opens)
_SHAPES: dict[bytes, tuple[bool, int, bool]] = {
    b"open": (False, 1, True),
    b"openat": (True, 1, True),
    b"openat2": (True, 1, True),
    b"creat": (False, 1, True),
    b"rename": (False, 2, False),
    b"renameat": (True, 2, False),
    b"renameat2": (True, 2, False),
    b"link": (False, 2, False),
    b"linkat": (True, 2, False),
    b"truncate": (False, 1, False),
}
_SYMLINK = (b"symlink", b"symlinkat")
FILE_SYSCALLS = tuple(("" if n == b"openat" else "?") + n.decode() for n in (*_SHAPES, *_SYMLINK))
FILE_CALLS = tuple(n + b"(" for n in (*_SHAPES, *_SYMLINK))
_STR = re.compile(rb'"((?:\\x[0-9a-f]{2})*)"')
_FD = re.compile(rb"(AT_FDCWD|-?\d+)(?:<((?:\\x[0-9a-f]{2})*)>)?")
_RESULT = re.compile(rb"\) += (-?\d+)(?:<((?:\\x[0-9a-f]{2})*)>)?(?: ([A-Z][A-Z0-9_]*))?")
_FLAGS = re.compile(rb"(?:flags=)?(O_[A-Z0-9_|]+|0)")
_FLAG_WORDS = {b"O_CREAT": "create", b"O_TRUNC": "truncate", b"O_APPEND": "append",
               b"O_DIRECTORY": "directory", b"O_PATH": "path", b"O_TMPFILE": "tmpfile"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class FileCall:
    call: str  # the syscall
    path: bytes | None  # as named, under the directory strace named; None: not understood
    opened: bytes | None  # an open's result: the file the descriptor names (absolute)
    access: str  # read | write | read-write; "" for a call that opens nothing
    flags: tuple[str, ...]  # create, truncate, append, directory, path, tmpfile
    target: bytes | None  # rename, link, symlink: the new name (the symlink's own path)
    result: str  # "ok" or the errno name


@dataclass(frozen=True, slots=True)
class FileFact:
    """A file call of one traced process, its names made absolute by the process's cwd
    where strace named no directory (None: not known)."""

    time: float
    pid: int
    tid: int
    call: FileCall
    path: bytes | None
    target: bytes | None


def writes(c: FileCall) -> bool:
    """The call put content or a name at its path (or target): an open for writing, a
    creation, a truncation, a rename, a link or a symlink."""
    if c.call in ("rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat"):
        return True
    return c.access in ("write", "read-write") or "create" in c.flags or "truncate" in c.flags


def _unhex(s: bytes) -> bytes:
    return bytes.fromhex(s.replace(b"\\x", b"").decode("ascii"))


def _norm(path: bytes) -> bytes:
    """normpath, only where it changes something (most paths a program opens are plain)."""
    if b"/." in path or b"//" in path or path.startswith(b".") or path.endswith(b"/"):
        return os.path.normpath(path)
    return path


def _join(base: bytes | None, path: bytes) -> bytes:
    if path.startswith(b"/") or base is None:
        return _norm(path)
    return _norm(base.rstrip(b"/") + b"/" + path)


def _path(rest: bytes, pos: int, at: bool) -> tuple[bytes | None, int] | None:
    """A path argument at pos (after its directory fd when `at`): (path, next position)."""
    base: bytes | None = None
    if at:
        fd = _FD.match(rest, pos)
        if fd is None:
            return None
        base = _unhex(fd.group(2)) if fd.group(2) is not None else None
        pos = fd.end() + 2
    s = _STR.match(rest, pos)
    if s is None:
        return None
    return _join(base, _unhex(s.group(1))), s.end() + 2


def _access(flags: bytes) -> tuple[str, tuple[str, ...]]:
    words = set(flags.split(b"|"))
    access = "write" if b"O_WRONLY" in words else "read-write" if b"O_RDWR" in words else "read"
    return access, tuple(w for k, w in _FLAG_WORDS.items() if k in words)


def parse_file(rest: bytes) -> FileCall | None:
    """One line of a file call (after its timestamp); None for any other line or one whose
    shape is not understood."""
    open_ = rest.find(b"(")
    name = rest[:open_]
    m = _RESULT.search(rest)
    if m is None or (name not in _SHAPES and name not in _SYMLINK):
        return None
    ok = int(m.group(1)) >= 0
    result = "ok" if ok else (m.group(3) or b"EUNKNOWN").decode("ascii")
    opened = _unhex(m.group(2)) if ok and m.group(2) is not None else None
    pos = open_ + 1
    call = name.decode("ascii")
    if name in _SYMLINK:  # symlink(TARGET, [dirfd,] LINKPATH): the link is what is made
        s = _STR.match(rest, pos)
        if s is None:
            return None
        got = _path(rest, s.end() + 2, name == b"symlinkat")
        if got is None:
            return None
        return FileCall(call, got[0], None, "", (), got[0], result)
    at, count, opens = _SHAPES[name]
    first = _path(rest, pos, at)
    if first is None:
        return None
    path, pos = first
    target = None
    if count == 2:
        second = _path(rest, pos, at)
        if second is None:
            return None
        target = second[0]
    access, flags = "", tuple[str, ...]()
    if name == b"creat":
        access, flags = "write", ("create", "truncate")
    elif opens:
        fl = _FLAGS.match(rest, pos + (len(b"{") if rest.startswith(b"{", pos) else 0))
        if fl is None:
            return None
        access, flags = _access(fl.group(1))
    return FileCall(call, path, opened if opens else None, access, flags, target, result)
