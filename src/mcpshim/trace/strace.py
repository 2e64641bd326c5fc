"""strace as the exec event engine of `mcpshim run --trace`: its command line and a parser.

Everything here is pure: it builds strace's argv and turns the events strace wrote (parsed
by trace.parse) into processes, exec attempts and socket calls (trace.net). Running
strace, probing for it and writing the log live in `trace.run`.

Why this command line. `-DD` keeps the traced command the supervisor's own child (same pid,
same exit status, signals reach it directly; the tracer runs as a detached grandchild).
`--seccomp-bpf` with a syscall list of process events only (exec, fork/clone, exit, chdir)
means no other syscall stops the tracee: about 0.2 ms per fork+exec. Two more calls are on
the list only as wake-ups, `set_robust_list` (glibc makes it early in every forked child and
every new thread) and `sigaltstack` (Go makes it early in every thread of its own): strace
6.1 resumes a new tracee with PTRACE_SYSCALL, a stop at every syscall, until its first
seccomp stop, so a thread that never execs (an MCP server's worker threads) stopped twice per
syscall for its whole life: 22 us a syscall instead of 0.3, 0.3 to 0.5 ms per tool call of
the SDK server. The parser skips their lines. The socket calls that cross a boundary
(NET_SYSCALLS: socket, connect, bind, listen, accept, the sends that can carry an address,
getsockopt for a non-blocking connect's outcome, getsockname/getpeername for the ports
and peers no other call names) are on the list too (trace.net): each
stops its caller, so a process that sends a lot over sockets (send() is sendto in glibc)
pays a stop per send (docs/performance.md). One output file
(`-o FILE`, each line prefixed by the thread id) and not one per thread (`-ff`): creating a
file per process cost about 1 ms per exec on ext4 here; the `<unfinished ...>` /
`<... resumed>` halves a single file has are joined back by the parser. `-xx` prints
every byte of every string as `\\xHH` (newlines, invalid UTF-8 and quotes round-trip
exactly and nothing needs unquoting); `-s 131072` is Linux's MAX_ARG_STRLEN, the largest
string execve accepts, so no argument is cut (a send's buffer too: parse.sanitize empties
it before it is stored); `-y` shows the path behind the fd of fchdir/execveat and the
inode of a socket's (`socket:[INODE]`, not -yy: trace.netparse says why); `-ttt`
stamps each line with UTC seconds and microseconds; `-v` prints the environment each exec
passes, whose PATH says why a command missed its shim (the line is
cut down to its PATH strings before it is written anywhere: parse.sanitize). Signal lines
stay on (`-e signal=none` would also hide `+++ killed by SIG... +++`, the only record of a
process's death by a signal); the parser skips them.

A process (thread group) is built from the per-thread events merged by time: a clone with
CLONE_THREAD adds a thread to its caller's process, anything else starts a process whose
cwd is a copy of the parent's. Exec attempts keep the path passed to execve, the argv, the
cwd and the result; a failed attempt followed, in the same process, by another attempt with
the same argv is one step of a PATH search (execvp walking PATH), the others failed for good.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mcpshim.trace.fileparse import FILE_SYSCALLS, FileFact
from mcpshim.trace.straceargs import MAX_ARG_STRLEN, NET_SYSCALLS, SYSCALLS, strace_argv

if TYPE_CHECKING:  # the parser and the follower load with build_trace: strace_argv needs neither
    from mcpshim.trace.metaparse import MetaFact
    from mcpshim.trace.net import NetAttempt
    from mcpshim.trace.parse import Event

__all__ = [
    "FILE_SYSCALLS",
    "MAX_ARG_STRLEN",
    "NET_SYSCALLS",
    "SYSCALLS",
    "ExecAttempt",
    "Process",
    "Trace",
    "build_trace",
    "start_ticks_at",
    "strace_argv",
]

# the command line's own (what it traces): trace.straceargs
# ---- processes -----------------------------------------------------------------------------


def start_ticks_at(t: float, boot_anchor: float, clk_tck: int) -> int:
    """The /proc stat start (ticks since boot) of a process forked at UTC time t."""
    return math.floor((t - boot_anchor) * clk_tck + 1e-6)


@dataclass
class Process:
    pid: int
    ppid: int | None
    time: float  # when it was forked (the root: its first event)
    start: int | None
    cwd: bytes | None
    status: int | None = None
    signal: str = ""
    exec_count: int = 0
    parent_known: bool = True
    children: list[int] = field(default_factory=list)
    # The start ticks of its first own event: it had started by then. `start` is derived
    # from the fork's entry, which a busy machine can leave well before the child exists.
    latest: int | None = None
    exit_time: float | None = None  # when its leader exited (strace's `+++` line)


@dataclass(frozen=True)
class ExecAttempt:
    time: float
    pid: int
    tid: int
    cwd: bytes | None
    filename: bytes  # as passed to execve (execveat: joined to its directory fd)
    argv: tuple[bytes, ...] | None
    truncated: bool
    result: str
    search_step: bool  # a failed step of a PATH search that went on to another directory
    env_path: bytes | None = None  # the PATH it passed (None: no PATH, or not printed)
    env_known: bool = False  # its environment was printed


@dataclass
class Trace:
    processes: dict[int, Process]
    execs: list[ExecAttempt]
    net: list[NetAttempt] = field(default_factory=list)
    meta: list[MetaFact] = field(default_factory=list)  # chmod, chown, utime (trace.metaparse)
    files: list[FileFact] = field(default_factory=list)  # opens, renames (trace.fileparse)

    def last_exec(self, pid: int) -> ExecAttempt | None:
        ok = [e for e in self.execs if e.pid == pid and e.result == "ok"]
        return ok[-1] if ok else None


def _merged(files: Mapping[int, Sequence[Event]]) -> Iterator[Event]:
    """All events in time order; one thread's events keep their file order."""
    iters = [((ev.time, ev.tid, i, ev) for i, ev in enumerate(evs)) for evs in files.values()]
    for _t, _tid, _i, ev in heapq.merge(*iters, key=lambda x: (x[0], x[1], x[2])):
        yield ev


def _join(base: bytes | None, path: bytes) -> bytes | None:
    if path.startswith(b"/"):
        return os.path.normpath(path)
    if base is None:
        return None
    return os.path.normpath(os.path.join(base, path))


def build_trace(
    files: Mapping[int, Sequence[Event]],
    root_pid: int,
    root_cwd: bytes,
    root_start: int | None,
    root_ppid: int | None,
    boot_anchor: float,
    clk_tck: int,
) -> Trace:
    """Processes and exec attempts of the family from the per-thread events."""
    tgid: dict[int, int] = {root_pid: root_pid}
    procs: dict[int, Process] = {}
    execs: list[ExecAttempt] = []
    net: list[tuple[int, Event]] = []
    meta: list[MetaFact] = []
    opened: list[FileFact] = []
    for ev in _merged(files):
        pid = tgid.get(ev.tid)
        if pid is None:  # a thread or process whose creation we did not see
            pid = tgid[ev.tid] = ev.tid
        proc = procs.get(pid)
        if proc is None:
            is_root = pid == root_pid
            proc = procs[pid] = Process(
                pid,
                root_ppid if is_root else None,
                ev.time,
                root_start if is_root else None,
                root_cwd if is_root else None,
                parent_known=is_root,
            )
        if proc.latest is None:
            proc.latest = start_ticks_at(ev.time, boot_anchor, clk_tck)
        if ev.kind == "spawn":
            if ev.thread:
                tgid[ev.child] = pid
                continue
            tgid[ev.child] = ev.child
            ppid = proc.ppid if ev.same_parent else pid
            start = start_ticks_at(ev.time, boot_anchor, clk_tck)
            early = procs.get(ev.child)  # its first line had the same microsecond
            if early is not None and not early.parent_known:
                early.ppid, early.start, early.parent_known = ppid, start, ppid is not None
                early.cwd = early.cwd if early.cwd is not None else proc.cwd
            else:
                procs[ev.child] = Process(
                    ev.child, ppid, ev.time, start, proc.cwd, parent_known=ppid is not None
                )
            proc.children.append(ev.child)
        elif ev.kind == "chdir":
            proc.cwd = _join(proc.cwd, ev.path) if ev.path is not None else None
        elif ev.kind == "exit":
            if ev.tid == pid:  # the leader's exit is the process's
                proc.status, proc.signal, proc.exit_time = ev.status, ev.signal, ev.time
        elif ev.kind == "exec":
            filename = ev.filename
            if ev.dirfd_path is not None and not filename.startswith(b"/"):
                base = ev.dirfd_path or proc.cwd
                joined = _join(base, filename) if filename else base
                filename = joined if joined is not None else filename
            execs.append(ExecAttempt(ev.time, pid, ev.tid, proc.cwd, filename, ev.argv,
                                     ev.truncated, ev.result, False, ev.env_path,
                                     ev.env_known))  # fmt: skip
            if ev.result == "ok":
                proc.exec_count += 1
        elif ev.kind == "net":
            net.append((pid, ev))
        elif ev.kind == "meta" and ev.meta is not None:  # (only traced under --contain-write)
            from mcpshim.trace.metaparse import MetaFact

            path = ev.meta.path
            path = path if path is None or path.startswith(b"/") else _join(proc.cwd, path)
            meta.append(MetaFact(ev.time, pid, ev.tid, ev.meta, path))
        elif ev.kind == "file" and ev.file is not None:  # (only traced with file tracing)
            f = ev.file
            path = f.path if f.path is None or f.path[:1] == b"/" else _join(proc.cwd, f.path)
            target = f.target
            if target is not None and target[:1] != b"/":
                target = _join(proc.cwd, target)
            opened.append(FileFact(ev.time, pid, ev.tid, f, path, target))
    from mcpshim.trace.net import follow

    return Trace(procs, _mark_search_steps(execs), follow(net), meta, opened)


def _mark_search_steps(execs: list[ExecAttempt]) -> list[ExecAttempt]:
    nxt: dict[int, int] = {}
    out = list(execs)
    for i in range(len(out) - 1, -1, -1):
        e = out[i]
        j = nxt.get(e.pid)
        if e.result not in ("ok", "?") and j is not None and out[j].argv == e.argv:
            out[i] = dataclasses.replace(e, search_step=True)
        nxt[e.pid] = i
    return out
