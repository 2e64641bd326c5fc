"""The log records of a traced session, built from the parsed trace and the session's log.

One `trace-exec` record per exec attempt (failed ones too), `trace-fork` for processes that
never exec'd, `trace-net` per socket call that crossed a boundary (trace.net), and
`trace-gap` for family members no record explains. Identity follows the
shims: (boot id, pid, start ticks). A start read from /proc while the process lived is
exact; otherwise it is derived from the fork's timestamp and snapped to an exact start the
log holds for that pid (shim record, sampler) within one tick. argv, Unix socket paths and
DNS names are redacted here, before anything reaches the log; of the environment only PATH
was ever kept, of what a process sent only a DNS query's first bytes (parse.sanitize).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from mcpshim.base.display import b64_fields, json_text
from mcpshim.log.execlog import EventRecord, ExecRecord, Record
from mcpshim.log.redact import redact_argv, redact_text
from mcpshim.log.shimhelper import is_shim_helper
from mcpshim.proc.procinfo import start_ticks
from mcpshim.shim.native import FALLBACK_MARK
from mcpshim.trace.configrun import configured_runs
from mcpshim.trace.filefacts import FileTracing, file_records, meta_place, program_of
from mcpshim.trace.metaparse import MetaFact
from mcpshim.trace.net import NetAttempt
from mcpshim.trace.selfexe import Images, is_exe_link
from mcpshim.trace.strace import ExecAttempt, Process, Trace

__all__ = [
    "ExecRefused",
    "FileTracing",
    "PortRefused",
    "WriteOutside",
    "exact_starts",
    "exec_payloads",
    "find_gaps",
    "iso_time",
    "meta_payload",
    "net_payload",
    "process_starts",
    "shim_helper_pids",
    "shim_paths",
    "trace_payloads",
]

#: why a contained session's ruleset refused an exec (filename, cwd, result), or None
ExecRefused = Callable[[bytes, bytes | None, str], str | None]
#: why it refused a TCP connect (port, result), or None
PortRefused = Callable[[int, str], str | None]
#: whether a path is outside a contained session's write directories (why), or None
WriteOutside = Callable[[bytes], str | None]


def iso_time(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat()


def _bytes_field(name: str, value: bytes | None) -> dict[str, Any]:
    if value is None:
        return {name: None}
    return {name: json_text(value), **b64_fields({name: value})}


def process_starts(trace: Trace, exact: Mapping[int, Sequence[int]]) -> dict[int, int | None]:
    """Each traced process's start ticks, the half of its identity the pid lacks."""
    starts = {pid: _snap(p, exact.get(pid, ())) for pid, p in trace.processes.items()}
    for pid, st in exact.items():
        if pid not in starts and len(st) == 1:
            starts[pid] = st[0]
    return starts


def trace_payloads(
    trace: Trace,
    session: str,
    boot_id: str,
    exact: Mapping[int, Sequence[int]],
    shim_dirs: Sequence[bytes] = (),
    refused: ExecRefused | None = None,
    port_refused: PortRefused | None = None,
    shim_paths: Mapping[int, Iterable[bytes]] | None = None,
    write_outside: WriteOutside | None = None,
    files: FileTracing | None = None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every record of one trace: its execs and forks, and its socket calls. In a contained
    session (`refused`, `port_refused`) an exec or a connect the ruleset refused says why
    (`blocked`) on its own record: one record per fact; with write rules
    (`write_outside`), each metadata change outside them is a `trace-file` record. With
    file tracing (`files`), so is each file fact (trace.filefacts): a credential opened, a
    place that runs later written or made executable, a written file run, a program run
    after its parent read the project's configuration (trace.configrun)."""
    yield from exec_payloads(trace, session, boot_id, exact, shim_dirs, refused, shim_paths)
    starts = process_starts(trace, exact)
    program = program_of(trace) if files is not None else None
    for m in trace.meta:
        why = None
        if write_outside is not None:
            why = write_outside(m.path) if m.path is not None else "a file the trace did not name"
        place = meta_place(m, files.table, program) if files and program else None
        if why or place:
            payload = meta_payload(m, session, boot_id, starts, why or None)
            if place is not None:
                payload["persistence"] = place.label
            yield "trace-file", payload
    if files is not None:
        yield from _file_records(trace, session, boot_id, starts, files, shim_dirs)
    clients = _client_sockets(trace.net)
    for a in trace.net:
        payload = net_payload(a, session, boot_id, starts)
        if a.call == "bind" and a.outcome == "bound" and (a.pid, a.socket) in clients:
            payload["purpose"] = "source-port"  # a client's own port (a DNS client's)
        inet = a.call == "connect" and a.port is not None and a.family in ("inet", "inet6")
        if (
            port_refused is not None
            and inet
            and (why := port_refused(a.port or 0, a.errno or "ok"))
        ):
            payload["blocked"] = why
        yield "trace-net", payload


def _file_records(trace: Trace, session: str, boot_id: str, starts: Mapping[int, int | None],
                  files: FileTracing, shim_dirs: Sequence[bytes],
                  ) -> Iterator[tuple[str, dict[str, Any]]]:  # fmt: skip
    def head(t: float, pid: int, tid: int) -> dict[str, Any]:
        out = {"session": session, "time": iso_time(t), "boot_id": boot_id, "pid": pid,
               "start": starts.get(pid)}  # fmt: skip
        if tid != pid:
            out["tid"] = tid
        return out

    for fields in file_records(trace, head, files, starts):
        yield "trace-file", fields
    for _t, fields in configured_runs(trace, head, files.table, starts, shim_dirs):
        yield "trace-file", fields


def _client_sockets(net: Iterable[NetAttempt]) -> set[tuple[int, int | None]]:
    """(pid, socket) of the datagram sockets that connected or sent: a bind on one of them
    chose the port its replies come back to (Chromium's DNS client binds 0.0.0.0:PORT,
    then connects to the resolver), a client's port, not a listener."""
    return {(a.pid, a.socket) for a in net
            if a.socket is not None and a.call in ("connect", "send")}  # fmt: skip


def exec_payloads(
    trace: Trace,
    session: str,
    boot_id: str,
    exact: Mapping[int, Sequence[int]],
    shim_dirs: Sequence[bytes] = (),
    refused: ExecRefused | None = None,
    shim_paths: Mapping[int, Iterable[bytes]] | None = None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The log records of one trace: (kind, payload), in time order; argv redacted.

    A shim's exec is two traced execs in one process: the shim script (`shim_script`: its
    path is in a shim dir, or is the path a shim record of that pid says it was run as,
    `shim_paths`, wherever the shims live), then the target the shim exec's (`via_shim`:
    the shim's name). A native shim that hands an exec to its sh shim makes one more in
    between, the interpreter sourcing it (`_native_hop`): a shim hop too. In a contained
    session (`refused`), an attempt its ruleset refused says why (`blocked`). An exec of an
    exe link in /proc (`/proc/self/exe`) says which file that was in the process that
    made it (`resolved`: trace.selfexe; null when the trace cannot tell)."""
    paths = {pid: set(p) for pid, p in (shim_paths or {}).items()}
    starts = process_starts(trace, exact)
    last_ok = {e.pid: e for e in trace.execs if e.result == "ok"}
    prev_script: dict[int, bytes] = {}
    images = Images(trace)
    for e in trace.execs:
        payload = _exec_payload(e, trace, session, boot_id, starts, last_ok.get(e.pid))
        ran: bytes | None = e.filename
        if is_exe_link(e.filename):
            ran = images.ran(e)
            payload.update(_bytes_field("resolved", ran))
        if e.argv is not None and is_shim_helper(e.argv):
            payload["shim_helper"] = True  # the shim library's own (a parent's argv read)
        elif e.result == "ok":
            script = prev_script.pop(e.pid, None)
            if os.path.dirname(e.filename) in shim_dirs or e.filename in paths.get(e.pid, ()):
                payload["shim_script"] = True
                prev_script[e.pid] = e.filename
            elif script is not None and _native_hop(e.argv):
                payload["shim_script"] = True
                prev_script[e.pid] = script
            elif script is not None:
                payload["via_shim"] = os.path.basename(script).decode("utf-8", "replace")
        elif refused is not None and ran is not None and (why := refused(ran, e.cwd, e.result)):
            payload["blocked"] = why
        yield "trace-exec", payload
    helpers = shim_helper_pids(trace)
    for p in trace.processes.values():
        if p.exec_count == 0 and not any(e.pid == p.pid for e in trace.execs):
            mark = {"shim_helper": True} if p.pid in helpers else {}
            yield (
                "trace-fork",
                {
                    **mark,
                    "session": session,
                    "time": iso_time(p.time),
                    "boot_id": boot_id,
                    "pid": p.pid,
                    "ppid": p.ppid,
                    "start": starts[p.pid],
                    "parent_start": starts.get(p.ppid) if p.ppid is not None else None,
                    **_bytes_field("cwd", p.cwd),
                    "exit_status": p.status,
                    "signal": p.signal or None,
                    "exit_time": iso_time(p.exit_time) if p.exit_time is not None else None,
                },
            )


_HOP = FALLBACK_MARK.encode() + b"\n"


def _native_hop(argv: Sequence[bytes] | None) -> bool:
    """Whether an exec right after a shim's is its native shim's hand-over to the sh shim:
    `INTERP [-p] -c '# mcpshim-shim v1 native fallback ...'` (only a shim's own exec
    follows a shim's in the same process)."""
    if not argv or len(argv) < 3:
        return False
    i = 2 if argv[1] == b"-p" else 1
    return len(argv) > i + 1 and argv[i] == b"-c" and argv[i + 1].startswith(_HOP)


def shim_helper_pids(trace: Trace) -> set[int]:
    """The processes of the shim library's helper (log.redact_sh.is_shim_helper): its execs,
    and a shell's fork that only started one (bash's `$(...)`)."""
    execs = {e.pid for e in trace.execs if e.argv is not None and is_shim_helper(e.argv)}
    forks = {p.ppid for p in trace.processes.values() if p.pid in execs and p.ppid is not None}
    idle = {p.pid for p in trace.processes.values() if p.exec_count == 0}
    return execs | (forks & idle)


def net_payload(
    a: NetAttempt, session: str, boot_id: str, starts: Mapping[int, int | None]
) -> dict[str, Any]:
    """A `trace-net` record (docs/log-format.md). A Unix socket path and a DNS name may hold
    anything, a token too: both go through the one redaction, then the JSON escape."""
    out: dict[str, Any] = {
        "session": session,
        "time": iso_time(a.time),
        "boot_id": boot_id,
        "pid": a.pid,
        "start": starts.get(a.pid),
        "call": a.call,
        "family": a.family,
        "transport": a.transport,
        **_redacted_field("address", a.address),
        "port": a.port,
        "outcome": a.outcome,
        "socket": a.socket,
    }
    if a.errno:
        out["errno"] = a.errno
    if a.tid != a.pid:
        out["tid"] = a.tid
    if a.abstract:
        out["abstract"] = True
    if a.call == "accept":
        out.update(_redacted_field("local_address", a.local_address), local_port=a.local_port)
    if a.nonblocking:
        out["nonblocking"] = True
        out["settled"] = iso_time(a.settled) if a.settled is not None else None
    if a.purpose:
        out["purpose"] = a.purpose
    if a.queries:
        hits: list[str] = []
        names = [redact_text(name, hits) for name, _ in a.queries]
        out["queries"] = [
            {"name": json_text(n), **b64_fields({"name": n}), "type": qtype}
            for n, (_, qtype) in zip(names, a.queries, strict=True)
        ]
        if hits:
            out["queries_redacted"] = sorted(set(hits))
    if a.count > 1:
        out["count"] = a.count
        out["last_time"] = iso_time(a.last_time or a.time)
    return out


def meta_payload(
    m: MetaFact, session: str, boot_id: str, starts: Mapping[int, int | None], outside: str | None
) -> dict[str, Any]:
    """A `trace-file` record: a chmod, chown or utime call of a contained family's process
    on a file outside its write directories (Landlock does not refuse them). The path goes
    through the one redaction, as argv does."""
    out: dict[str, Any] = {
        "session": session,
        "time": iso_time(m.time),
        "boot_id": boot_id,
        "pid": m.pid,
        "start": starts.get(m.pid),
        "call": m.call.call,
        "change": m.call.what,
        **_redacted_field("path", m.path),
        "detail": m.call.detail,
        "result": m.call.result,
    }
    if outside:
        out["outside"] = outside
    if m.tid != m.pid:
        out["tid"] = m.tid
    return out


def _redacted_field(name: str, value: bytes | None) -> dict[str, Any]:
    hits: list[str] = []
    out = _bytes_field(name, redact_text(value, hits) if value is not None else None)
    if hits:
        out[f"{name}_redacted"] = sorted(set(hits))
    return out


def _snap(p: Process, exact: Sequence[int]) -> int | None:
    """The exact start the log holds for this process, if one lies where it can: from
    the fork's entry (its derived start) to its own first event (one tick either way
    for rounding); else the derived start."""
    derived = p.start
    if derived is None:
        return exact[0] if len(exact) == 1 else None
    hi = max(derived, p.latest if p.latest is not None else derived) + 1
    close = [s for s in exact if derived - 1 <= s <= hi]
    return min(close, key=lambda s: abs(s - derived)) if close else derived


def _exec_payload(
    e: ExecAttempt,
    trace: Trace,
    session: str,
    boot_id: str,
    starts: Mapping[int, int | None],
    last: ExecAttempt | None,
) -> dict[str, Any]:
    p: Process = trace.processes[e.pid]
    red = redact_argv(list(e.argv or ()))
    out: dict[str, Any] = {
        "session": session,
        "time": iso_time(e.time),
        "boot_id": boot_id,
        "pid": e.pid,
        "ppid": p.ppid,
        "start": starts.get(e.pid),
        "parent_start": starts.get(p.ppid) if p.ppid is not None else None,
        **_bytes_field("cwd", e.cwd),
        **_bytes_field("filename", e.filename),
        "argv": [json_text(a) for a in red.argv] if e.argv is not None else None,
        **b64_fields({"argv": red.argv}),
        "result": e.result,
        "search": e.search_step,
        "exit_status": p.status if last is e else None,
    }
    if e.env_known:  # the PATH it passed: null when its environment had none (env -i)
        out.update(_bytes_field("path", e.env_path))
    if red.rules:
        out["argv_redacted"] = sorted(set(red.rules))
    if e.truncated:
        out["argv_truncated"] = True
    if e.tid != e.pid:
        out["tid"] = e.tid
    if last is e and p.signal:
        out["signal"] = p.signal
    if last is e and p.exit_time is not None:
        out["exit_time"] = iso_time(p.exit_time)
    return out


def shim_paths(records: Iterable[Record]) -> dict[int, set[bytes]]:
    """The path each shim record says its shim was run as (`$0`), by pid."""
    out: dict[int, set[bytes]] = {}
    for r in records:
        if isinstance(r, ExecRecord) and r.invoked_as:
            out.setdefault(r.pid, set()).add(r.invoked_as)
    return out


def exact_starts(records: Iterable[Record], live: Mapping[int, int]) -> dict[int, list[int]]:
    exact: dict[int, list[int]] = {pid: [st] for pid, st in live.items()}
    me = start_ticks(os.getpid())  # the supervisor: the root's parent
    if me is not None:
        exact[os.getpid()] = [me]
    for r in records:
        pid: Any
        st: Any
        if isinstance(r, ExecRecord):
            pid, st = r.pid, r.start
        elif r.kind in ("observed", "survivor"):
            pid, st = r.data.get("pid"), r.data.get("start")
        else:
            continue
        if isinstance(pid, int) and isinstance(st, int) and st not in exact.get(pid, []):
            exact.setdefault(pid, []).append(st)
    return exact


def find_gaps(
    trace: Trace,
    records: Iterable[Record],
    exact: Mapping[int, Sequence[int]],
    ignore: set[int],
) -> Iterator[dict[str, Any]]:
    """Family members no record explains: seen by the sampler or the supervisor but not by the
    tracer or a shim, or seen by the tracer without the fork that made them."""
    known: dict[int, list[int | None]] = {}
    for p in trace.processes.values():
        known.setdefault(p.pid, []).append(_snap(p, exact.get(p.pid, ())))
    recs = list(records)
    for r in recs:
        if isinstance(r, ExecRecord):
            known.setdefault(r.pid, []).append(r.start)
    reported: set[tuple[int, int | None]] = set()
    for r in recs:
        if not isinstance(r, EventRecord) or r.kind not in ("observed", "survivor", "reaped"):
            continue
        pid, st = r.data.get("pid"), r.data.get("start")
        if not isinstance(pid, int) or pid in ignore or (pid, st) in reported:
            continue
        starts = known.get(pid, [])
        if any(s is None or st is None or abs(s - st) <= 1 for s in starts):
            continue
        reported.add((pid, st))
        yield {
            "pid": pid,
            "start": st,
            "ppid": r.data.get("ppid"),
            "seen_as": r.kind,
            "seen_at": r.where,
            "cmdline": r.data.get("cmdline"),
            **({"cmdline_b64": r.data["cmdline_b64"]} if "cmdline_b64" in r.data else {}),
            "exe": r.data.get("exe"),
            "reason": f"a {r.kind} family member with no exec or fork record from the tracer "
            "or a shim",
        }
    for p in trace.processes.values():
        if not p.parent_known:
            yield {
                "pid": p.pid,
                "start": p.start,
                "ppid": None,
                "seen_as": "trace",
                "reason": "the tracer saw this process but not the fork that created it",
            }
