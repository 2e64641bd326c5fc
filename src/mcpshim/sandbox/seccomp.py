"""A seccomp filter for a contained family whose TCP connects are restricted: no MPTCP.

Landlock's TCP port rules hold `connect` on TCP sockets; a Multipath TCP socket
(`socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)`) is another protocol to them, and on this
kernel (6.18, `net.mptcp.enabled=1`) such a socket connected to a port no rule allowed and
delivered its data, to a plain TCP listener too (MPTCP falls back to TCP with a peer that
does not speak it). So where ports are restricted the family may not make one: the filter
fails `socket()` with IPPROTO_MPTCP (EACCES, as the ruleset fails what it refuses; Go and
curl then fall back to TCP, which the rules hold). It looks at the protocol argument, a
register, so it holds whatever the socket's family and type flags. What it cannot see it
refuses too: `socketcall(SYS_SOCKET, ...)` of 32-bit programs (the arguments are in memory)
and `io_uring_setup` (io_uring makes sockets without the socket call: EPERM, as container
runtimes answer it).

Unprivileged: a filter needs only no_new_privs, which the Landlock domain set already;
like the domain it belongs to the thread that installs it and is inherited by everything
that thread starts (`contained`). x86_64 (with its i386 and x32 ABIs) and aarch64 (with
32-bit ARM); elsewhere `available` says why not and the start line says MPTCP is open.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import sys
from dataclasses import dataclass

__all__ = ["IPPROTO_MPTCP", "available", "install_no_mptcp", "program"]

IPPROTO_MPTCP = 262
_SOCKETCALL_SOCKET = 1  # socketcall's first argument for socket()
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_LD_ABS_W, _JEQ_K, _RET_K = 0x20, 0x15, 0x06
_NR, _ARCH, _ARG0, _ARG2 = 0, 4, 16, 32  # seccomp_data offsets (args: low words, little endian)
_X32 = 0x40000000


@dataclass(frozen=True)
class _Abi:
    arch: int  # AUDIT_ARCH_*
    socket: tuple[int, ...]
    io_uring_setup: tuple[int, ...]
    socketcall: int | None = None


_ABIS = {
    "x86_64": (
        _Abi(0xC000003E, (41, _X32 | 41), (425, _X32 | 425)),  # x86_64 and x32
        _Abi(0x40000003, (359,), (425,), 102),  # i386
    ),
    "aarch64": (
        _Abi(0xC00000B7, (198,), (425,)),
        _Abi(0x40000028, (281,), (425,), 102),  # 32-bit ARM
    ),
}


class _Insn(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Insn))]


def available() -> str | None:
    """None where the filter can be built, else why not (one phrase)."""
    if not sys.platform.startswith("linux"):
        return f"seccomp is a Linux feature and this is {sys.platform}"
    if platform.machine() not in _ABIS or sys.byteorder != "little":
        return f"no MPTCP filter is written for {platform.machine()}"
    return None


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k): per ABI of `machine`, socket() with IPPROTO_MPTCP,
    socketcall(SYS_SOCKET) and io_uring_setup fail; everything else is allowed."""
    asm: list[tuple[str, int, str]] = [("ld", _ARCH, "")]
    asm += [("jeq", abi.arch, f"abi{i}") for i, abi in enumerate(_ABIS[machine])]
    asm.append(("ret", _ALLOW, ""))  # an ABI this machine cannot run: nothing to hold
    for i, abi in enumerate(_ABIS[machine]):
        asm += [("label", 0, f"abi{i}"), ("ld", _NR, "")]
        asm += [("jeq", nr, "protocol") for nr in abi.socket]
        if abi.socketcall is not None:
            asm.append(("jeq", abi.socketcall, "socketcall"))
        asm += [("jeq", nr, "io_uring") for nr in abi.io_uring_setup]
        asm.append(("ret", _ALLOW, ""))
    asm += [
        ("label", 0, "protocol"), ("ld", _ARG2, ""), ("jeq", IPPROTO_MPTCP, "deny"),
        ("ret", _ALLOW, ""),
        ("label", 0, "socketcall"), ("ld", _ARG0, ""), ("jeq", _SOCKETCALL_SOCKET, "deny"),
        ("ret", _ALLOW, ""),
        ("label", 0, "io_uring"), ("ret", _ERRNO | errno.EPERM, ""),
        ("label", 0, "deny"), ("ret", _ERRNO | errno.EACCES, ""),
    ]  # fmt: skip
    return _assemble(asm)


def _assemble(asm: list[tuple[str, int, str]]) -> list[tuple[int, int, int, int]]:
    """Classic BPF from (op, k, label): `jeq` jumps to its label when equal, else falls
    through; a jump counts the instructions it skips."""
    at: dict[str, int] = {}
    n = 0
    for op, _k, label in asm:
        if op == "label":
            at[label] = n
        else:
            n += 1
    out: list[tuple[int, int, int, int]] = []
    for op, k, label in asm:
        if op == "ld":
            out.append((_LD_ABS_W, 0, 0, k))
        elif op == "ret":
            out.append((_RET_K, 0, 0, k))
        elif op == "jeq":
            jt = at[label] - (len(out) + 1)
            if not 0 <= jt < 256:
                raise ValueError(f"jump to {label} out of range")
            out.append((_JEQ_K, jt, 0, k))
    return out


def install_no_mptcp() -> None:
    """Install the filter on the calling thread (no_new_privs must be set: the Landlock
    domain's `enforce` sets it); OSError when the kernel refuses it."""
    why = available()
    if why is not None:
        raise OSError(errno.ENOSYS, why)
    insns = program(platform.machine())
    table = (_Insn * len(insns))(*(_Insn(*i) for i in insns))
    prog = _Prog(len(insns), table)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp filter: {os.strerror(err)}")
