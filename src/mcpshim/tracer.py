"""strace as the exec event engine of `mcpshim run --trace`: its command line and a parser.

Everything here is pure: it builds strace's argv and turns the output strace wrote into
processes and exec attempts. Running strace, probing for it and writing the log live in
`trace_run`.

Why this command line. `-DD` keeps the traced command the supervisor's own child (same pid,
same exit status, signals reach it directly; the tracer runs as a detached grandchild).
`--seccomp-bpf` with a syscall list of process events only (exec, fork/clone, exit, chdir)
means no other syscall stops the tracee: about 0.2 ms per fork+exec. One output file
(`-o FILE`, each line prefixed by the thread id) and not one per thread (`-ff`): creating a
file per process cost about 1 ms per exec on ext4 here; the `<unfinished ...>` /
`<... resumed>` halves a single file has are joined back by the parser. `-xx` prints
every byte of every string as `\\xHH` (newlines, invalid UTF-8 and quotes round-trip
exactly and nothing needs unquoting); `-s 131072` is Linux's MAX_ARG_STRLEN, the largest
string execve accepts, so no argument is cut; `-y` shows the path behind the fd of
fchdir/execveat; `-ttt` stamps each line with UTC seconds and microseconds. Signal lines
stay on (`-e signal=none` would also hide `+++ killed by SIG... +++`, the only record of a
process's death by a signal); the parser skips them.

A process (thread group) is built from the per-thread events merged by time: a clone with
CLONE_THREAD adds a thread to its caller's process, anything else starts a process whose
cwd is a copy of the parent's. Exec attempts keep the path passed to execve, the argv, the
cwd and the result; a failed attempt followed, in the same process, by another attempt with
the same argv is one step of a PATH search (execvp walking PATH), the others failed for good.
"""

from __future__ import annotations

import heapq
import math
import os
import re
import signal
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "MAX_ARG_STRLEN",
    "SYSCALLS",
    "Event",
    "ExecAttempt",
    "Process",
    "Trace",
    "build_trace",
    "parse_line",
    "parse_output",
    "read_output",
    "start_ticks_at",
    "strace_argv",
]

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
)


def strace_argv(strace: str, output: str, command: Sequence[str]) -> list[str]:
    """The full command line: strace with its options, then COMMAND exactly as given."""
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
        "-s",
        str(MAX_ARG_STRLEN),
        "-e",
        "trace=" + ",".join(SYSCALLS),
        "--",
        *command,
    ]


# ---- one line ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Event:
    """One line of one thread's file."""

    time: float
    tid: int
    kind: str  # exec | spawn | chdir | exit | superseded
    filename: bytes = b""
    argv: tuple[bytes, ...] | None = None  # None: strace could not read the array
    truncated: bool = False
    result: str = ""  # "ok", an errno name, or "?" when the call never returned
    child: int = 0
    thread: bool = False
    same_parent: bool = False  # CLONE_PARENT: the child's parent is the caller's parent
    path: bytes | None = None  # chdir/fchdir target; None when strace could not name it
    dirfd_path: bytes | None = None  # execveat: the directory fd's path, b"" for AT_FDCWD
    status: int | None = None  # exit: the exit code, or 128+N for signal N
    signal: str = ""


_TS = re.compile(rb"(\d+\.\d+) ")
_STR = re.compile(rb'"((?:\\x[0-9a-f]{2})*)"(\.\.\.)?')
_FD = re.compile(rb"(\d+)(?:<((?:\\x[0-9a-f]{2})*)>)?")
_RESULT = re.compile(rb"\) += (-?\d+|\?)(?: ([A-Z][A-Z0-9_]*)\b.*)?$")
_EXITED = re.compile(rb"\+\+\+ exited with (\d+) \+\+\+$")
_KILLED = re.compile(rb"\+\+\+ killed by (SIG[A-Z0-9+-]+)")
_SUPERSEDED = re.compile(rb"\+\+\+ superseded by execve in pid (\d+) \+\+\+$")
_FLAGS = re.compile(rb"flags=([A-Z0-9_|]+)")


def _unhex(s: bytes) -> bytes:
    return bytes.fromhex(s.replace(b"\\x", b"").decode("ascii"))


def _string(body: bytes, pos: int) -> tuple[bytes, bool, int] | None:
    m = _STR.match(body, pos)
    if m is None:
        return None
    return _unhex(m.group(1)), m.group(2) is not None, m.end()


def _argv(body: bytes, pos: int) -> tuple[tuple[bytes, ...] | None, bool, int]:
    """The `["..", ".."]` array at pos: (items, truncated, end); None if strace gave none."""
    if not body.startswith(b"[", pos):
        end = body.find(b", ", pos)
        return None, False, end if end >= 0 else len(body)
    pos += 1
    items: list[bytes] = []
    truncated = False
    while not body.startswith(b"]", pos):
        if body.startswith(b", ", pos):
            pos += 2
        if body.startswith(b"...", pos):
            truncated = True
            pos += 3
            continue
        s = _string(body, pos)
        if s is None:
            return tuple(items), True, pos
        items.append(s[0])
        truncated |= s[1]
        pos = s[2]
    return tuple(items), truncated, pos + 1


def _result(line: bytes) -> str:
    if line.endswith(b"<unfinished ...>"):
        return "?"
    m = _RESULT.search(line)
    if m is None:
        return "?"
    if m.group(1) == b"?":
        return "?"
    if int(m.group(1)) < 0:
        return (m.group(2) or b"EUNKNOWN").decode("ascii")
    return "ok"


def _retval(line: bytes) -> int:
    m = _RESULT.search(line)
    return int(m.group(1)) if m and m.group(1) != b"?" else -1


def _signal_number(name: str) -> int | None:
    try:
        return int(signal.Signals[name])
    except KeyError:
        return None


def parse_line(tid: int, line: bytes) -> Event | None:
    """One line of one thread (`-ttt -xx -y`, pid prefix removed, splits joined), or None
    for lines we do not use."""
    m = _TS.match(line)
    if m is None:
        return None
    t = float(m.group(1))
    rest = line[m.end() :]
    if rest.startswith(b"execve(") or rest.startswith(b"execveat("):
        at = rest.startswith(b"execveat(")
        pos = rest.index(b"(") + 1
        dirfd: bytes | None = None
        if at:
            if rest.startswith(b"AT_FDCWD", pos):
                dirfd, pos = b"", pos + len(b"AT_FDCWD")
            else:
                fd = _FD.match(rest, pos)
                if fd is None:
                    return None
                dirfd = _unhex(fd.group(2)) if fd.group(2) is not None else None
                pos = fd.end()
            pos += 2
        s = _string(rest, pos)
        if s is None:
            return None
        filename, trunc, pos = s
        argv, atrunc, _ = _argv(rest, pos + 2)
        return Event(t, tid, "exec", filename, argv, trunc or atrunc, _result(rest),
                     dirfd_path=dirfd)  # fmt: skip
    if rest.startswith((b"clone(", b"clone3(", b"fork(", b"vfork(")):
        child = _retval(rest)
        if child <= 0:
            return None
        fm = _FLAGS.search(rest)
        flags = set(fm.group(1).split(b"|")) if fm else set()
        return Event(t, tid, "spawn", child=child, thread=b"CLONE_THREAD" in flags,
                     same_parent=b"CLONE_PARENT" in flags)  # fmt: skip
    if rest.startswith((b"chdir(", b"fchdir(")):
        if _result(rest) != "ok":
            return None
        pos = rest.index(b"(") + 1
        if rest.startswith(b"chdir("):
            s = _string(rest, pos)
            return Event(t, tid, "chdir", path=s[0] if s else None)
        fd = _FD.match(rest, pos)
        path = _unhex(fd.group(2)) if fd and fd.group(2) is not None else None
        return Event(t, tid, "chdir", path=path)
    if rest.startswith(b"+++ "):
        if e := _EXITED.search(rest):
            return Event(t, tid, "exit", status=int(e.group(1)))
        if k := _KILLED.search(rest):
            name = k.group(1).decode("ascii")
            num = _signal_number(name)
            return Event(t, tid, "exit", status=128 + num if num else None, signal=name)
        if s2 := _SUPERSEDED.search(rest):
            return Event(t, tid, "superseded", child=int(s2.group(1)))
    return None


_PID = re.compile(rb"(\d+) +")  # strace pads the pid column
_UNFINISHED = b" <unfinished ...>"
_RESUMED = re.compile(rb"(\d+\.\d+ )<\.\.\. [a-z0-9_]+ resumed>")


def parse_output(lines: Iterable[bytes], final: bool = True) -> dict[int, list[Event]]:
    """Events per thread from strace's single `-f -o FILE` output, in file order.

    A syscall that blocks while another thread is printed is split in two lines,
    `PID TS call(args <unfinished ...>` and later `PID TS <... call resumed>rest`; every
    split is joined back (the entry's time, both halves' text), so no line is lost to it.
    A split never resumed (the thread died in the call) keeps its entry half, result "?".
    strace ends a line only when it starts the next one: once strace has exited the last
    line is whole without its newline; while it runs (`final=False`) it is left for later.
    """
    out: dict[int, list[Event]] = {}
    pending: dict[int, bytes] = {}
    for raw in lines:
        if not raw.endswith(b"\n") and not final:
            break
        m = _PID.match(raw)
        if m is None:
            continue
        tid = int(m.group(1))
        line = raw[m.end() :].rstrip(b"\n")
        r = _RESUMED.match(line)
        if r is not None:
            head = pending.pop(tid, None)
            if head is None:
                continue
            line = head + line[r.end() :]
        elif line.endswith(_UNFINISHED):
            if tid in pending:  # an earlier split that never resumed
                _add(out, tid, pending.pop(tid) + _UNFINISHED)
            pending[tid] = line[: -len(_UNFINISHED)]
            continue
        elif tid in pending and line[:1].isdigit() and b" +++ " in line[:40]:
            _add(out, tid, pending.pop(tid) + _UNFINISHED)
        _add(out, tid, line)
    for tid, head in pending.items():
        _add(out, tid, head + _UNFINISHED)
    return out


def _add(out: dict[int, list[Event]], tid: int, line: bytes) -> None:
    ev = parse_line(tid, line)
    if ev is not None:
        out.setdefault(tid, []).append(ev)


def read_output(path: Path, final: bool = True) -> dict[int, list[Event]]:
    """The events of strace's output file (`final`: strace has exited); {} if none yet."""
    try:
        with path.open("rb") as fh:
            return parse_output(fh, final)
    except FileNotFoundError:
        return {}


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


@dataclass
class Trace:
    processes: dict[int, Process]
    execs: list[ExecAttempt]

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
                proc.status, proc.signal = ev.status, ev.signal
        elif ev.kind == "exec":
            filename = ev.filename
            if ev.dirfd_path is not None and not filename.startswith(b"/"):
                base = ev.dirfd_path or proc.cwd
                joined = _join(base, filename) if filename else base
                filename = joined if joined is not None else filename
            execs.append(ExecAttempt(ev.time, pid, ev.tid, proc.cwd, filename, ev.argv,
                                     ev.truncated, ev.result, False))  # fmt: skip
            if ev.result == "ok":
                proc.exec_count += 1
    return Trace(procs, _mark_search_steps(execs))


def _mark_search_steps(execs: list[ExecAttempt]) -> list[ExecAttempt]:
    nxt: dict[int, int] = {}
    out = list(execs)
    for i in range(len(out) - 1, -1, -1):
        e = out[i]
        j = nxt.get(e.pid)
        if e.result not in ("ok", "?") and j is not None and out[j].argv == e.argv:
            out[i] = ExecAttempt(e.time, e.pid, e.tid, e.cwd, e.filename, e.argv, e.truncated,
                                 e.result, True)  # fmt: skip
        nxt[e.pid] = i
    return out
