"""strace's command line for a traced session: what it traces and how it prints it (the
choices are design.md's, "Tracing: `run`, by default"). Apart from the trace's parser and
model (trace.strace): `run` builds it, and probes it, before its server starts.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["MAX_ARG_STRLEN", "NET_SYSCALLS", "SYSCALLS", "strace_argv"]

MAX_ARG_STRLEN = 131072  # Linux: PAGE_SIZE * 32, the longest single execve string
SYSCALLS = (
    "execve",
    "execveat",
    "fork",
    "vfork",
    "clone",
    "clone3",
    "exit",
    "exit_group",
    "chdir",
    "fchdir",
    "set_robust_list",  # wake-ups: see the module's docstring
    "sigaltstack",
)
#: the socket calls that cross a boundary (trace.net), and those that complete what they
#: say: socket (family, type), getsockopt (a non-blocking connect's outcome),
#: getsockname / getpeername (a port or peer no other call named)
NET_SYSCALLS = (
    "socket",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    "sendto",
    "sendmsg",
    "sendmmsg",
    "getsockopt",
    "getsockname",
    "getpeername",
)


def strace_argv(
    strace: str,
    output: str,
    command: Sequence[str],
    env: bool = True,
    net: bool = True,
    extra: Sequence[str] = (),
    files: bool = False,
) -> list[str]:
    """The full command line: strace with its options, then COMMAND exactly as given.

    `env`: print each exec's environment (-v); `net`: trace the socket calls too. With
    either, the output must go through parse.sanitize before it is stored (trace.run reads
    it from a pipe). `extra`: more system calls to trace; `files`: the file calls too
    (FILE_SYSCALLS: opens, renames, links; trace.fileparse)."""
    if files:  # the file calls after the others
        from mcpshim.trace.fileparse import FILE_SYSCALLS

        extra = (*extra, *FILE_SYSCALLS)
    return [
        strace,
        "-DD",  # the tracer: a grandchild in its own process group (no terminal signals)
        "-q",
        "-f",
        "--seccomp-bpf",
        "-o",
        output,
        "-ttt",
        "-xx",
        "-y",
        *(["-v"] if env else []),
        "-s",
        str(MAX_ARG_STRLEN),
        "-e",
        "trace=" + ",".join(dict.fromkeys((*SYSCALLS, *(NET_SYSCALLS if net else ()), *extra))),
        "--",
        *command,
    ]
