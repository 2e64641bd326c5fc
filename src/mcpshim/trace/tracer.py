"""strace's tracer, found from /proc: who traces a process, whether the session's command
has left strace for its own program, the tracer -DD left to the subreaper, whether a
process is gone (trace.run, as the command starts and as the session ends)."""

from __future__ import annotations

import os

__all__ = ["is_gone", "left_strace", "orphaned_tracer", "tracer_of"]


def tracer_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def is_gone(pid: int) -> bool:
    from mcpshim.proc.procinfo import read_stat

    st = read_stat(pid)
    return st is None or st.gone


def left_strace(pid: int, strace_cmdline: bytes) -> bool:
    """The child left strace (exec'd the command, or ended). Its command line reads
    empty while an exec is under way (strace's own, as posix_spawn returns, too) and
    once it is a zombie: empty means undecided unless it has ended."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmdline = fh.read()
    except OSError:
        return True
    if cmdline:
        return cmdline != strace_cmdline
    return is_gone(pid)


def orphaned_tracer(child_pid: int, strace: str) -> int:
    """The tracer, found as what the middle process left to us, the subreaper: our
    child, named strace, leading a process group of its own (-DD), alive or not."""
    from mcpshim.proc.procinfo import read_stat

    me, name = os.getpid(), os.path.basename(strace).encode()[:15]
    for entry in os.listdir("/proc"):
        st = read_stat(int(entry)) if entry.isdigit() else None
        if st is None or st.pid == child_pid or st.ppid != me:
            continue
        if st.comm == name and st.pgid == st.pid:
            return st.pid
    return 0
