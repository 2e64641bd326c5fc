"""The file facts a traced session records (`trace-file`), from its file calls and execs.

Three kinds, each with its own time and process (review files each under the call in flight
then), none with any of the file's content:

- an open of a credential location (log.filetable), read or write, with its outcome; in a
  contained session a read the ruleset refused says why (`blocked`);
- a write to a place that runs later (creation, truncation, append, a rename or link into
  it, a mode made executable there: the metadata calls, trace.metaparse);
- an exec of a file a process of the session created or wrote, directly or as the script
  an interpreter was given (`sh build.sh`), with the write it came from: matched by path,
  and by inode where the tracer's pump saw both (`Inodes`: a file renamed into place is the
  file written under its first name; a path written, then replaced by someone else, is not).

Paths go through the one redaction, as argv does (trace.records).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcpshim.base.display import b64_fields, json_text
from mcpshim.log.filetable import FileTable, Place
from mcpshim.log.redact import redact_text
from mcpshim.trace.fileparse import FileFact, writes
from mcpshim.trace.metaparse import MetaFact
from mcpshim.trace.strace import ExecAttempt, Trace

__all__ = [
    "INTERPRETERS",
    "FileTracing",
    "Inodes",
    "ReadRefused",
    "file_payloads",
    "file_records",
    "meta_place",
    "program_of",
    "script_operand",
]

#: why a contained session's ruleset refused reading a file (path, result), or None
ReadRefused = Callable[[bytes, str], str | None]
Payload = Callable[[float, int, int], dict[str, Any]]  # (time, pid, tid) -> the record's head
Ino = tuple[int, int]  # (device, inode)

INTERPRETERS = re.compile(
    rb"^(?:sh|dash|bash|zsh|ksh|mksh|busybox|python[0-9.]*|node|nodejs|perl[0-9.]*|"
    rb"ruby[0-9.]*|php[0-9.]*|lua[0-9.]*|Rscript|tclsh|fish)$"
)
_NO_SCRIPT = frozenset({b"-c", b"-e", b"-m", b"-E", b"--eval", b"-p", b"--print", b"-r"})
_MAX_SAME = 64  # records of one process's opens of one file (a loop reading it)


def script_operand(
    filename: bytes, argv: Sequence[bytes] | None, cwd: bytes | None
) -> bytes | None:
    """The script an interpreter was given (`sh build.sh`, `python3 -u x.py`), absolute;
    None when it runs a line (`-c`), a module, or no known interpreter."""
    if not argv or not INTERPRETERS.match(os.path.basename(filename)):
        return None
    for a in argv[1:]:
        if a in _NO_SCRIPT:
            return None
        if a == b"--" or a.startswith(b"-"):
            continue
        if a.startswith(b"/"):
            return os.path.normpath(a)
        return os.path.normpath(os.path.join(cwd, a)) if cwd is not None else None
    return None


_WRITE_HEAD = re.compile(rb"(\d+) +(\d+\.\d+) (?:open|openat|openat2|creat)\(")
_OPENED = re.compile(rb"\) += \d+<((?:\\x[0-9a-f]{2})+)>$")
_EXEC_LINE = re.compile(rb'(\d+) +(\d+\.\d+) execve\("((?:\\x[0-9a-f]{2})*)", \[(.*)\], .*\) += 0$')
_WRITES = (b"O_WRONLY", b"O_RDWR", b"O_CREAT", b" creat(")
_CWD = re.compile(rb"^(\d+) +\d+\.\d+ \w+\(AT_FDCWD<((?:\\x[0-9a-f]{2})+)>", re.M)
_ITEM = re.compile(rb'"((?:\\x[0-9a-f]{2})*)"')
_TID = re.compile(rb"^(\d+) ")
_UNFINISHED = b" <unfinished ...>"
_RESUMED = re.compile(rb"^(\d+) +\d+\.\d+ <\.\.\. \w+ resumed>")


def _unhex(s: bytes) -> bytes:
    return bytes.fromhex(s.replace(b"\\x", b"").decode("ascii"))


def _stat(path: bytes) -> Ino | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


@dataclass
class Inodes:
    """The inodes of files as the session wrote and ran them, read while it runs: the
    tracer's pump hands it each batch of whole lines (within 10 ms of strace writing them),
    keyed by the line's thread and time (what the parsed trace holds too)."""

    written: dict[tuple[int, float], Ino] = field(default_factory=dict)
    ran: dict[tuple[int, float], tuple[Ino | None, Ino | None]] = field(default_factory=dict)
    _pending: dict[int, bytes] = field(default_factory=dict)  # a call split by another's line

    def feed(self, lines: bytes) -> None:
        """One batch: the lines that wrote a file or ran one, found by their words (an
        import-heavy start prints a thousand opens that are neither; none is looked at)."""
        if _UNFINISHED in lines or b" resumed>" in lines:
            lines = self._joined(lines)
        for start, end in sorted(set(_lines_with(lines, (*_WRITES, b" execve(")))):
            line = lines[start:end]
            m = _EXEC_LINE.match(line) if line.endswith(b") = 0") else None
            if m is not None:  # (what comes after it: the new image's first calls)
                self._exec(int(m.group(1)), float(m.group(2)), _unhex(m.group(3)),
                           m.group(4), lines[end:])  # fmt: skip
                continue
            head, opened = _WRITE_HEAD.match(line), _OPENED.search(line)
            if head is not None and opened is not None:
                ino = _stat(_unhex(opened.group(1)))
                if ino is not None:
                    self.written[(int(head.group(1)), float(head.group(2)))] = ino

    def _joined(self, lines: bytes) -> bytes:
        """The lines with each `<unfinished ...>` call joined to its `<... resumed>` half
        (a vfork's exec is split by its parent's next line), as the parser joins them."""
        out = []
        for raw in lines.split(b"\n"):
            if raw.endswith(_UNFINISHED):
                m = _TID.match(raw)
                if m is not None:
                    self._pending[int(m.group(1))] = raw[: -len(_UNFINISHED)]
                continue
            r = _RESUMED.match(raw)
            if r is None:
                out.append(raw)
            elif (head := self._pending.pop(int(r.group(1)), None)) is not None:
                out.append(head + raw[r.end() :])
        return b"\n".join(out)

    def _exec(self, tid: int, t: float, filename: bytes, argv_text: bytes, lines: bytes) -> None:
        argv = [_unhex(x) for x in _ITEM.findall(argv_text)]
        cwd = None
        relative = script_operand(filename, argv, b"")  # (joined to nothing: as given)
        if not filename.startswith(b"/") or (relative and not relative.startswith(b"/")):
            cwd = _cwd_of(tid, lines)
        path = filename if filename.startswith(b"/") else (
            os.path.join(cwd, filename) if cwd is not None else None)  # fmt: skip
        script = script_operand(filename, argv, cwd)
        self.ran[(tid, t)] = (_stat(path) if path else None, _stat(script) if script else None)


def _lines_with(text: bytes, words: Sequence[bytes]) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of `text` that holds one of `words`."""
    for w in words:
        i = text.find(w)
        while i >= 0:
            start = text.rfind(b"\n", 0, i) + 1
            end = text.find(b"\n", i)
            end = len(text) if end < 0 else end
            yield start, end
            i = text.find(w, end)


def _cwd_of(tid: int, after: bytes) -> bytes | None:
    """A thread's working directory: as its next call under AT_FDCWD in `after` prints it
    (the loader's opens right after its exec, in the same batch), else /proc's while it
    lives."""
    for m in _CWD.finditer(after):
        if int(m.group(1)) == tid:
            return _unhex(m.group(2))
    try:
        return os.readlink(f"/proc/{tid}/cwd").encode("utf-8", "surrogateescape")
    except OSError:
        return None


@dataclass
class FileTracing:
    """A session's file tracing (`run --trace-files`, or --contain): the table of locations
    for the session (its HOME, workspace and PATH), a contained session's read refusals,
    the inodes the tracer's pump saw."""

    table: FileTable
    read_refused: ReadRefused | None = None
    inodes: Inodes = field(default_factory=Inodes)


@dataclass(frozen=True)
class _Write:
    time: float
    pid: int
    tid: int
    call: str
    path: bytes  # the name it was written under
    ino: Ino | None


def program_of(trace: Trace) -> Callable[[int, float], str]:
    """The program a process ran at a time (its last exec that succeeded before then)."""
    by_pid: dict[int, list[tuple[float, str]]] = {}
    for e in trace.execs:
        if e.result == "ok":
            name = os.path.basename(e.filename).decode("utf-8", "surrogateescape")
            by_pid.setdefault(e.pid, []).append((e.time, name))

    def of(pid: int, t: float) -> str:
        name = ""
        for when, n in by_pid.get(pid, ()):
            if when > t:
                break
            name = n
        return name

    return of


def _executable(mode: str) -> bool:
    """A mode as strace prints it (0755, S_IFREG|0755) with an execute bit."""
    digits = mode.rsplit("|", 1)[-1]
    try:
        return int(digits, 8) & 0o111 != 0
    except ValueError:
        return False


def meta_place(m: MetaFact, table: FileTable, program: Callable[[int, float], str]) -> Place | None:
    """The place that runs later a mode change made executable, if it was one."""
    if m.path is None or m.call.what != "mode" or not _executable(m.call.detail):
        return None
    return table.persistence(m.path, program(m.pid, m.time))


def file_payloads(
    trace: Trace,
    head: Payload,
    table: FileTable,
    read_refused: ReadRefused | None = None,
    inodes: Inodes | None = None,
    starts: Mapping[int, int | None] | None = None,
) -> Iterator[tuple[float, dict[str, Any]]]:
    """(time, fields) of each file fact of the trace's opens, renames and execs, in time
    order (a mode change is the metadata record's: `meta_place`); `head` gives a record's
    common fields (session, time, boot id, pid, start, tid)."""
    program = program_of(trace)
    ino = inodes or Inodes()
    out: list[tuple[float, dict[str, Any]]] = []
    same: dict[tuple[int, bytes, str, str], int] = {}
    for f in trace.files:
        got = _open_fact(f, table, program, read_refused, same)
        if got is not None:
            out.append((f.time, {**head(f.time, f.pid, f.tid), **got}))
    out += _ran_written(trace, head, ino, starts or {})
    out.sort(key=lambda x: x[0])
    yield from out


def _open_fact(
    f: FileFact,
    table: FileTable,
    program: Callable[[int, float], str],
    read_refused: ReadRefused | None,
    same: dict[tuple[int, bytes, str, str], int],
) -> dict[str, Any] | None:
    c = f.call
    fields: dict[str, Any] = {"call": c.call, "result": c.result}
    place: Place | None = None
    where = f.target if c.target is not None else f.path
    if writes(c) and where is not None:
        place = table.persistence(where, program(f.pid, f.time))
        if place is None and c.opened is not None and c.opened != where:
            place = table.persistence(c.opened, program(f.pid, f.time))
    if place is not None:
        fields.update(change=_change(c), persistence=place.label, _path=where)
    elif c.access and "path" not in c.flags and "directory" not in c.flags and f.path is not None:
        place = table.credential(f.path)
        if place is None and c.opened is not None and c.opened != f.path:
            place = table.credential(c.opened)
        if place is None:
            return None
        fields.update(change="open", credential=place.label, _path=f.path)
        if place.private_key:
            fields["private_key"] = True
        why = read_refused(f.path, c.result) if read_refused is not None else None
        if why:
            fields["blocked"] = why
    else:
        return None
    key = (f.pid, fields["_path"], fields["change"], c.result)
    same[key] = same.get(key, 0) + 1
    if same[key] > _MAX_SAME:
        return None
    if c.access:
        fields["access"] = c.access
    if c.flags:
        fields["flags"] = list(c.flags)
    if c.opened is not None and c.opened != fields["_path"]:
        fields["_opened"] = c.opened
    return fields


def _change(c: Any) -> str:
    if c.call.startswith("rename"):
        return "rename"
    if c.call.startswith(("link", "symlink")):
        return "link"
    if "append" in c.flags:
        return "append"
    if c.call == "truncate" or ("truncate" in c.flags and "create" not in c.flags):
        return "truncate"
    return "create" if "create" in c.flags and "truncate" not in c.flags else "write"


def _ran_written(
    trace: Trace, head: Payload, ino: Inodes, starts: Mapping[int, int | None]
) -> list[tuple[float, dict[str, Any]]]:
    """Each exec (or interpreter's script) of a file a process of the session wrote."""
    events: list[tuple[float, int, Any]] = [(f.time, 0, f) for f in trace.files if writes(f.call)]
    events += [(e.time, 1, e) for e in trace.execs if e.result == "ok"]
    events.sort(key=lambda x: (x[0], x[1]))
    by_path: dict[bytes, _Write] = {}
    by_ino: dict[Ino, _Write] = {}
    out = []
    for _t, kind, ev in events:
        if kind == 0:
            f: FileFact = ev
            name = f.target if f.target is not None else f.path
            if name is None or f.call.result != "ok":
                continue
            moved = f.call.call.startswith("rename") and f.path is not None
            origin = by_path.pop(f.path, None) if moved and f.path is not None else None
            got = ino.written.get((f.tid, f.time))
            # renamed into place: the file written under its first name
            w = origin or _Write(f.time, f.pid, f.tid, f.call.call, name, got)
            by_path[name] = w
            if f.call.opened is not None:
                by_path[f.call.opened] = w
            if w.ino is not None:
                by_ino[w.ino] = w
            continue
        e: ExecAttempt = ev
        path: bytes | None = e.filename
        if not e.filename.startswith(b"/"):
            path = os.path.normpath(os.path.join(e.cwd, e.filename)) if e.cwd else None
        script = script_operand(e.filename, e.argv, e.cwd)
        file_ino, script_ino = ino.ran.get((e.tid, e.time), (None, None))
        for ran, ran_ino, how in ((path, file_ino, ""), (script, script_ino, "script")):
            src = _written(ran, ran_ino, by_path, by_ino)
            if ran is None or src is None:
                continue
            fields: dict[str, Any] = {"call": "execve", "change": "run", "result": "ok"}
            fields["_path"] = ran
            if how:
                fields["interpreter"] = os.fsdecode(os.path.basename(e.filename))
            if ran_ino is not None:
                fields["inode"] = f"{ran_ino[0]}:{ran_ino[1]}"
            written = {**head(src.time, src.pid, src.tid), "call": src.call,
                       "start": starts.get(src.pid)}  # fmt: skip
            written.pop("session", None)
            if src.path != ran:
                written["_path"] = src.path
            fields["written"] = written
            out.append((e.time, {**head(e.time, e.pid, e.tid), **fields}))
    return out


def _written(
    ran: bytes | None,
    ran_ino: Ino | None,
    by_path: Mapping[bytes, _Write],
    by_ino: Mapping[Ino, _Write],
) -> _Write | None:
    """The write of the session a file run at `ran` (inode `ran_ino`) came from, if any."""
    if ran is None:
        return None
    if ran_ino is not None and ran_ino in by_ino:
        return by_ino[ran_ino]
    w = by_path.get(ran)
    if w is None or (ran_ino is not None and w.ino is not None and w.ino != ran_ino):
        return None  # another file is at that path now: not what the session wrote
    return w


def file_records(
    trace: Trace, head: Payload, files: FileTracing, starts: Mapping[int, int | None]
) -> Iterator[dict[str, Any]]:
    """Each file fact as a `trace-file` record's fields, its paths redacted."""
    for _t, fields in file_payloads(trace, head, files.table, files.read_refused, files.inodes,
                                    starts):  # fmt: skip
        yield _paths_redacted(fields)


def _paths_redacted(fields: dict[str, Any]) -> dict[str, Any]:
    """The raw paths of a file fact (`_path`, `_opened`, a write's `_path`) as redacted text
    fields, as argv is (a path may hold a token: a file named after one)."""
    out = {k: v for k, v in fields.items() if not k.startswith("_")}
    for raw, name in (("_path", "path"), ("_opened", "opened")):
        if raw in fields:
            hits: list[str] = []
            value = redact_text(fields[raw], hits)
            out.update({name: json_text(value), **b64_fields({name: value})})
            if hits:
                out[f"{name}_redacted"] = sorted(set(hits))
    if isinstance(out.get("written"), dict):
        out["written"] = _paths_redacted(out["written"])
    return out
