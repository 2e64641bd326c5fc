"""Landlock through ctypes: the ABI a kernel offers, a ruleset, and restricting oneself.

No root is needed and root is held too: a process restricts itself (after
PR_SET_NO_NEW_PRIVS) and every descendant inherits the domain; nothing in it can lift it.
A rule names a file or directory by an open descriptor, so it holds the inode the path
named when the rule was added: a file moved or hard-linked elsewhere keeps its rights, a
new file written at the path has none.

What EXECUTE covers (measured on Linux 6.18, ABI 7): every file the kernel opens to run a
program (execve of the file itself, its ELF interpreter, a `#!` interpreter). Shared
libraries are mapped by the loader with read and mmap, which Landlock does not check; a
program in a memfd (`fexecve`) is not checked either, and the ELF interpreter run as a
program (`ld.so ./binary`) loads any file it is named.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from dataclasses import dataclass

__all__ = [
    "EXECUTE",
    "READ_FILE",
    "REFER",
    "Ruleset",
    "abi_version",
    "enforce",
    "unavailable",
    "write_rights",
]

# include/uapi/linux/landlock.h
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE = (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
CONNECT_TCP = 1 << 1  # ABI 4 (net)
FILE_WRITE = WRITE_FILE | TRUNCATE  # the write rights a rule on a file may carry
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_CREATE_RULESET_VERSION = 1
_PR_SET_NO_NEW_PRIVS = 38
# The same numbers on every architecture (allocated after the syscall tables were unified).
_NR_CREATE, _NR_ADD_RULE, _NR_RESTRICT = 444, 445, 446


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the uapi header: 12 bytes
    _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]


class _NetPort(ctypes.Structure):
    _fields_ = [("allowed", ctypes.c_uint64), ("port", ctypes.c_uint64)]


def _libc() -> ctypes.CDLL:
    lib = ctypes.CDLL(None, use_errno=True)
    lib.syscall.restype = ctypes.c_long
    return lib


_LIBC = _libc() if sys.platform.startswith("linux") else None


def _call(nr: int, *args: object) -> int:
    assert _LIBC is not None
    rc = int(_LIBC.syscall(ctypes.c_long(nr), *args))
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return rc


def abi_version() -> int:
    """The Landlock ABI this kernel offers (1 to 7 as of Linux 6.15); OSError if none."""
    if _LIBC is None:
        raise OSError(errno.ENOSYS, "not Linux")
    return _call(_NR_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))


def unavailable() -> tuple[int, str]:
    """(the ABI, "") where Landlock can be used, else (0, why not, in one phrase)."""
    if not sys.platform.startswith("linux"):
        return 0, f"Landlock is a Linux feature and this is {sys.platform}"
    try:
        return abi_version(), ""
    except OSError as exc:
        if exc.errno == errno.EOPNOTSUPP:
            return 0, (
                "this kernel has Landlock but it is off (add landlock to the lsm= boot parameter)"
            )
        if exc.errno in (errno.ENOSYS, errno.EPERM):
            # EPERM: a seccomp filter (a container's) refuses the call
            why = "refused by a seccomp filter" if exc.errno == errno.EPERM else "not built in"
            return 0, f"this kernel has no usable Landlock ({os.uname().release}: {why})"
        return 0, f"Landlock probe failed: {exc.strerror}"


def write_rights(abi: int) -> int:
    """Every right that changes the file system, as far as this ABI knows them."""
    rights = WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


@dataclass
class Ruleset:
    """A ruleset being built: the rights it handles (everything else stays allowed) and the
    rules that allow some of them again. `fd` is what `enforce` applies."""

    handled_fs: int
    handled_net: int = 0
    fd: int = -1

    def __post_init__(self) -> None:
        attr = _RulesetAttr(self.handled_fs, self.handled_net)
        size = ctypes.sizeof(attr) if self.handled_net else 8  # ABI 1-3 know only `fs`
        self.fd = _call(_NR_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))

    def allow_path(self, path: str, access: int) -> None:
        """Allow `access` on the file, or everything beneath the directory, at `path`."""
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            rule = _PathBeneath(access & self.handled_fs, fd)
            _call(_NR_ADD_RULE, self.fd, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0))
        finally:
            os.close(fd)

    def allow_port(self, port: int) -> None:
        rule = _NetPort(CONNECT_TCP, port)
        _call(_NR_ADD_RULE, self.fd, _RULE_NET_PORT, ctypes.byref(rule), ctypes.c_uint32(0))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def enforce(ruleset_fd: int) -> None:
    """Restrict the calling thread (and so what it execs) to the ruleset: for good."""
    assert _LIBC is not None
    if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
    _call(_NR_RESTRICT, ruleset_fd, ctypes.c_uint32(0))
