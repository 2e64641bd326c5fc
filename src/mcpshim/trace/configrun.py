"""A program the project's configuration may have chosen: a process of the session read a
configuration file inside the workspace (log.filetable's `project` entries: cclsp.json, a
task runner's YAML), then a process it started ran a program that is not of the reader's
own installation. Whoever edits the checkout chose what ran (review: MCS107).

Read from the trace alone, after the session: each process's first program (past the
shims' hops), the files its parent opened for reading before it, and what the parent was
running then. The reader's own installation is the file it runs and, for an interpreter
given a script, the tree that script was installed in: the top `node_modules` directory
(a server's dependencies are its own: typescript-language-server forking tsserver), the
`site-packages` directory and its virtualenv, else the script's directory. The reader's own
program run again with no script and no code on its command line is its own too. No
file's content is read here: which of the files read named the program is review's to
say (review.rules.file_rules).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from mcpshim.base.display import b64_fields, json_text
from mcpshim.log.filetable import FileTable
from mcpshim.log.redact import redact_text
from mcpshim.log.shimhelper import is_shim_helper
from mcpshim.shim.native import FALLBACK_MARK
from mcpshim.trace.filefacts import script_operand
from mcpshim.trace.fileparse import writes
from mcpshim.trace.strace import ExecAttempt, Trace

__all__ = ["configured_runs", "installation"]

Payload = Callable[[float, int, int], dict[str, Any]]  # (time, pid, tid) -> the record's head
_MOST = 8  # configuration files named per run
_HOP = FALLBACK_MARK.encode()
_INLINE = frozenset({b"-c", b"-e", b"--eval", b"-p", b"--print"})  # code on the command line


def _script(e: ExecAttempt) -> bytes | None:
    """The script an interpreter was given, absolute (None: a line, a module, none)."""
    return script_operand(e.filename, e.argv, e.cwd)


def _real(path: bytes) -> bytes:
    return os.path.realpath(path)


def installation(script: bytes) -> bytes:
    """The tree a script was installed in (its real path): the top `node_modules`, the
    virtualenv (or `site-packages`) a Python module is in, else its directory."""
    parts = script.split(b"/")
    if b"node_modules" in parts:
        return b"/".join(parts[: parts.index(b"node_modules") + 1])
    for marker in (b"site-packages", b"dist-packages"):
        if marker in parts:
            i = parts.index(marker)
            env = b"/".join(parts[: i - 2]) if i >= 3 and parts[i - 2] == b"lib" else b""
            if env and os.path.isfile(env + b"/pyvenv.cfg"):
                return env
            return b"/".join(parts[: i + 1])
    return os.path.dirname(script)


def _beneath(path: bytes, root: bytes) -> bool:
    return path == root or path.startswith(root.rstrip(b"/") + b"/")


def _own(reader: ExecAttempt, ran: ExecAttempt) -> bool:
    """Whether `ran` runs something of the reader's own installation."""
    script, theirs = _script(ran), _script(reader)
    if theirs is not None and script is not None:
        return _beneath(_real(script), installation(_real(theirs)))
    mine = _real(ran.filename)
    if theirs is not None and _beneath(mine, installation(_real(theirs))):
        return True
    # the same file run again with no script and no code of its own (a binary re-run)
    inline = bool(ran.argv) and any(a in _INLINE for a in (ran.argv or ())[1:])
    return mine == _real(reader.filename) and script is None and not inline


def _hop(e: ExecAttempt, shim_dirs: Sequence[bytes]) -> bool:
    """A shim's own exec: the shim script, a native shim's hand-over, the shim helper."""
    if os.path.dirname(e.filename) in shim_dirs or (e.argv and is_shim_helper(e.argv)):
        return True
    argv = e.argv or ()
    i = 2 if len(argv) > 2 and argv[1] == b"-p" else 1
    return len(argv) > i + 1 and argv[i] == b"-c" and argv[i + 1].startswith(_HOP)


def configured_runs(
    trace: Trace,
    head: Payload,
    table: FileTable,
    starts: Mapping[int, int | None],
    shim_dirs: Sequence[bytes] = (),
) -> Iterator[tuple[float, dict[str, Any]]]:
    """(time, fields) of each first program of a process whose parent read the project's
    configuration before it ran, when that program is not the parent's own."""
    firsts: dict[int, ExecAttempt] = {}
    for e in trace.execs:
        if e.result == "ok" and e.pid not in firsts and not _hop(e, shim_dirs):
            firsts[e.pid] = e
    parents = {trace.processes[pid].ppid for pid in firsts if pid in trace.processes}
    reads: dict[int, list[tuple[float, bytes]]] = {}
    for f in trace.files:
        c = f.call
        if f.pid not in parents or c.result != "ok" or c.access not in ("read", "read-write"):
            continue
        if writes(c) or "directory" in c.flags or "path" in c.flags:
            continue
        path = c.opened or f.path
        if path is None or any(p == path for _t, p in reads.get(f.pid, ())):
            continue
        if table.project(path) is not None:
            reads.setdefault(f.pid, []).append((f.time, path))
    if not reads:
        return
    execs_of: dict[int, list[ExecAttempt]] = {}
    for e in trace.execs:
        if e.result == "ok":
            execs_of.setdefault(e.pid, []).append(e)
    for pid, e in sorted(firsts.items(), key=lambda x: x[1].time):
        ppid = trace.processes[pid].ppid if pid in trace.processes else None
        read = [(t, p) for t, p in reads.get(ppid or -1, ()) if t < e.time]
        reader = _image(execs_of, trace, ppid, e.time)
        if ppid is None or not read or reader is None or _own(reader, e):
            continue
        yield e.time, _fields(e, head, ppid, starts.get(ppid), read)


def _image(
    execs_of: Mapping[int, list[ExecAttempt]], trace: Trace, pid: int | None, t: float
) -> ExecAttempt | None:
    """What a process was running at `t`: its last exec before then, else its parent's
    (a fork that never exec'd runs its parent's program)."""
    seen = 0
    while pid is not None and seen < 64:
        ran = [e for e in execs_of.get(pid, ()) if e.time <= t]
        if ran:
            return ran[-1]
        proc = trace.processes.get(pid)
        pid, seen = (proc.ppid if proc is not None else None), seen + 1
    return None


def _fields(
    e: ExecAttempt, head: Payload, ppid: int, start: int | None, read: list[tuple[float, bytes]]
) -> dict[str, Any]:
    """The record's fields: the program run, and the reads before it (paths redacted as
    argv is: a file may be named after a token)."""
    hits: list[str] = []
    paths = [redact_text(path, hits) for _t, path in read[-_MOST:]]
    ran = redact_text(e.filename, hits)
    configured: dict[str, Any] = {**head(read[-1][0], ppid, ppid), "start": start,
                                  "paths": [json_text(p) for p in paths],
                                  **b64_fields({"paths": paths})}  # fmt: skip
    configured.pop("session", None)
    out = {**head(e.time, e.pid, e.tid), "call": "execve", "change": "run", "result": "ok",
           "path": json_text(ran), **b64_fields({"path": ran})}  # fmt: skip
    out["configured"] = configured
    if hits:
        out["path_redacted"] = sorted(set(hits))
    return out
