"""strace's output, parsed: one line into an `Event`, one output file into each thread's
events, with the `<unfinished ...>` / `<... resumed>` halves of a line joined back.

Strings come as `\\xHH` escapes for every byte (strace -xx), so they round-trip exactly;
signal lines are skipped, but `+++ killed by SIG... +++` is kept (the only record of a
process's death by a signal). See tracer for the command line that makes this output.

An exec line carries the environment the exec passed (strace -v): every variable, secrets
included. `sanitize` rewrites such a line to keep only its first `PATH=` string (what
getenv and execvp use); the tracer's pipe goes through it before a byte is written anywhere
(trace.run), so no other value reaches a file.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from mcpshim.log.shimhelper import is_shim_helper
from mcpshim.trace.fileparse import FILE_CALLS, FileCall, parse_file
from mcpshim.trace.metaparse import META_CALLS, MetaCall, parse_meta
from mcpshim.trace.netparse import NET_CALLS, Connected, NetCall, call_only, parse_net, shrink_send

__all__ = [
    "Event",
    "ExecFeed",
    "LinePump",
    "OutputParser",
    "parse_line",
    "parse_output",
    "read_output",
    "sanitize",
]


@dataclass(frozen=True, slots=True)
class Event:
    """One line of one thread's file."""

    time: float
    tid: int
    kind: str  # exec | spawn | chdir | exit | superseded | net | meta | file
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
    #: exec: the PATH the exec passed (its first PATH= string, bytes after '='); None when
    #: the environment held no PATH or was not printed (then `env_known` is False)
    env_path: bytes | None = None
    env_known: bool = False
    net: NetCall | None = None  # net: a socket call (trace.netparse)
    meta: MetaCall | None = None  # meta: a chmod, chown or utime call (trace.metaparse)
    file: FileCall | None = None  # file: an open, rename, link or truncate (trace.fileparse)


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


def _env_path(body: bytes, pos: int) -> tuple[bytes | None, bool]:
    """The first PATH value of the envp array at pos, and whether the array was printed."""
    if not body.startswith(b"[", pos):
        return None, False
    end = body.find(b"]", pos)
    if end < 0:
        return None, False
    at = body.find(_PATH_STR, pos, end)
    if at < 0:
        return None, True
    s = _string(body, at)
    return (s[0][5:] if s is not None else None), True


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
                if rest.startswith(b"(deleted)", pos):  # an unlinked file, a memfd
                    pos += len(b"(deleted)")
            pos += 2
        s = _string(rest, pos)
        if s is None:
            return None
        filename, trunc, pos = s
        argv, atrunc, pos = _argv(rest, pos + 2)
        env_path, env_known = _env_path(rest, pos + 2)
        return Event(t, tid, "exec", filename, argv, trunc or atrunc, _result(rest),
                     dirfd_path=dirfd, env_path=env_path, env_known=env_known)  # fmt: skip
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
    if rest.startswith(NET_CALLS):
        net = parse_net(rest)
        return Event(t, tid, "net", net=net) if net is not None else None
    if rest.startswith(META_CALLS):
        return Event(t, tid, "meta", meta=mc) if (mc := parse_meta(rest)) is not None else None
    if rest.startswith(FILE_CALLS):
        return Event(t, tid, "file", file=f) if (f := parse_file(rest)) is not None else None
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


_PATH_STR = b'"' + b"".join(b"\\x%02x" % c for c in b"PATH=")  # a string that starts PATH=
_EXEC_CALL = re.compile(rb"\d+ +\d+\.\d+ (execve|execveat)\(")
_TOKEN = re.compile(rb"[^,)\s]+")


def _skip_arg(line: bytes, pos: int) -> int:
    """The end of the argument at pos: a string, an array or a bare token (address, NULL,
    fd); -1 if the line does not have that shape. Strings hold only \\xHH escapes, so a
    quote or bracket outside them is structure."""
    if line.startswith(b'"', pos):
        end = line.find(b'"', pos + 1)
        if end < 0:
            return -1
        return end + 4 if line.startswith(b"...", end + 1) else end + 1
    if line.startswith(b"[", pos):
        end = line.find(b"]", pos)
        return -1 if end < 0 else end + 1
    fd = _FD.match(line, pos)
    if fd is not None and fd.group(2) is not None:  # -y: 3<path>, an unlinked one (deleted)
        end = fd.end()
        return end + len(b"(deleted)") if line.startswith(b"(deleted)", end) else end
    m = _TOKEN.match(line, pos)
    return -1 if m is None else m.end()


def sanitize(line: bytes) -> bytes:
    """One raw line of strace's output with the environment of an exec cut down to its
    PATH strings and a send's bytes left out (netparse.shrink_send). Other lines are
    returned as they are. An exec line whose shape is not understood loses everything after
    its filename but its result: never is a value of the environment passed on."""
    m = _EXEC_CALL.match(line)
    if m is None:
        return shrink_send(line) or b""
    pos = m.end()
    n_before = 1 if m.group(1) == b"execve" else 2  # execveat: dirfd, path
    envp = -1
    for i in range(n_before + 2):
        if i:
            if not line.startswith(b", ", pos):
                break
            pos += 2
        if i == n_before + 1:
            envp = pos
            break
        pos = _skip_arg(line, pos)
        if pos < 0:
            break
    if envp >= 0 and line.startswith(b"[", envp):
        end = line.find(b"]", envp)
        if end >= 0:
            # The first PATH string only (what getenv and execvp use); find, not split:
            # an environment is tens of strings, each four bytes of output per byte.
            at = line.find(_PATH_STR, envp, end)
            if at < 0:
                return line[: envp + 1] + line[end:]
            close = line.find(b'"', at + 1)
            stop = close + 4 if line.startswith(b"...", close + 1) else close + 1
            return line[: envp + 1] + line[at:stop] + line[end:]
    if envp >= 0 and not line.startswith(b'"', envp):
        end = _skip_arg(line, envp)  # an address or NULL: no values were printed
        if end >= 0:
            return line
    return call_only(line, m.end())  # not understood: the call's name and its result only


class LinePump:
    """Bytes from strace's pipe in, whole sanitized lines out (a partial line waits); the
    lines of sends that can become no fact are left out (netparse.Connected)."""

    def __init__(self) -> None:
        self._carry = b""
        self._parts: list[bytes] = []  # of a line longer than one read (a send's buffer)
        self._known = Connected()

    def feed(self, data: bytes) -> bytes:
        if data.find(b"\n") < 0:  # joined once the line ends, not copied at every read
            self._parts.append(data)
            return b""
        if self._parts:
            data = b"".join([self._carry, *self._parts, data])
            self._carry, self._parts = b"", []
        elif self._carry:
            data = self._carry + data
        end = data.rfind(b"\n") + 1
        self._carry = data[end:]
        # Line by line, by the call's name: a whole-chunk search would scan every buffer
        # and environment strace printed (hex, 4 bytes a byte) once more per word sought.
        lines = (self._line(ln) for ln in data[: end - 1].split(b"\n"))
        return b"".join(ln + b"\n" for ln in lines if ln is not None)

    def _line(self, line: bytes) -> bytes | None:
        if line.find(b"exec", 0, 48) >= 0:
            return sanitize(line)
        if line.find(b" send", 0, 48) >= 0:
            return shrink_send(line, self._known)
        if line.find(b" connect(", 0, 48) >= 0:
            self._known.note(line)  # its sends can become facts (to port 53: keep a query)
        elif line.find(b" socket(", 0, 48) >= 0:
            self._known.note_socket(line)
        return line

    def flush(self) -> bytes:
        """The last line, once strace is gone (it ends a line only when it starts the next)."""
        rest = self.take_carry()
        return (self._line(rest) or b"") if rest else b""

    def take_carry(self) -> bytes:
        """The raw partial line waiting here, for whoever reads the rest of it."""
        rest = b"".join([self._carry, *self._parts])
        self._carry, self._parts = b"", []
        return rest


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
    parser = OutputParser()
    for raw in lines:
        if not raw.endswith(b"\n") and not final:
            break
        parser.line(raw)
    return parser.events()


class OutputParser:
    """parse_output, one line at a time: `run` parses the trace as the pump stores it, so
    a session's end parses only what came last, not the whole output again. `on_exec`:
    called with each exec attempt as it is parsed."""

    def __init__(self, on_exec: Callable[[Event], None] | None = None) -> None:
        self._out: dict[int, list[Event]] = {}
        self._pending: dict[int, bytes] = {}
        self._on_exec = on_exec

    def feed(self, lines: bytes) -> None:
        """Whole lines (LinePump's), the last one's newline optional."""
        for raw in lines.split(b"\n"):
            if raw:
                self.line(raw)

    def line(self, raw: bytes) -> None:
        m = _PID.match(raw)
        if m is None:
            return
        tid, pending = int(m.group(1)), self._pending
        line = raw[m.end() :].rstrip(b"\n")
        r = _RESUMED.match(line)
        if r is not None:
            head = pending.pop(tid, None)
            if head is None:
                return
            line = head + line[r.end() :]
        elif line.endswith(_UNFINISHED):
            if tid in pending:  # an earlier split that never resumed
                self._add(tid, pending.pop(tid) + _UNFINISHED)
            pending[tid] = line[: -len(_UNFINISHED)]
            return
        elif tid in pending and line[:1].isdigit() and b" +++ " in line[:40]:
            self._add(tid, pending.pop(tid) + _UNFINISHED)
        self._add(tid, line)

    def _add(self, tid: int, line: bytes, out: dict[int, list[Event]] | None = None) -> None:
        if (ev := parse_line(tid, line)) is not None:
            (self._out if out is None else out).setdefault(tid, []).append(ev)
            if ev.kind == "exec" and out is None and self._on_exec is not None:
                self._on_exec(ev)

    def events(self) -> dict[int, list[Event]]:
        """Every thread's events so far, each split never resumed with its entry half."""
        out = {tid: list(evs) for tid, evs in self._out.items()}
        for tid, head in self._pending.items():
            self._add(tid, head + _UNFINISHED, out)
        return out


def read_output(path: Path, final: bool = True) -> dict[int, list[Event]]:
    """The events of strace's output file (`final`: strace has exited); {} if none yet."""
    try:
        with path.open("rb") as fh:
            return parse_output(fh, final)
    except FileNotFoundError:
        return {}


class ExecFeed:
    """The execs that succeeded, as whole sanitized lines arrive (the tracer's pump): for
    what must act on an exec while the session runs (`run --on-departure terminate`), not
    at its end. A call split by another thread's line is joined as parse_output joins it."""

    def __init__(self) -> None:
        self._pending: dict[int, bytes] = {}

    def feed(self, lines: bytes) -> list[Event]:
        out: list[Event] = []
        for raw in lines.split(b"\n"):
            m = _PID.match(raw)
            if m is None:
                continue
            tid, line = int(m.group(1)), raw[m.end() :]
            r = _RESUMED.match(line)
            if r is not None:
                head = self._pending.pop(tid, None)
                if head is None:
                    continue
                line = head + line[r.end() :]
            elif line.endswith(_UNFINISHED):
                if _EXEC_HEAD.match(line):
                    self._pending[tid] = line[: -len(_UNFINISHED)]
                continue
            if not _EXEC_HEAD.match(line):
                continue
            ev = parse_line(tid, line)
            if ev is None or ev.kind != "exec" or ev.result != "ok":
                continue
            if ev.argv is None or not is_shim_helper(ev.argv):  # not mcpshim's own work
                out.append(ev)
        return out


_EXEC_HEAD = re.compile(rb"\d+\.\d+ (?:execve|execveat)\(")
