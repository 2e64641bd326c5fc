"""Where a traced session's output lives, and the records it becomes.

strace's sanitized lines still hold every argument as the traced command got it, tokens
included, so they never go to a file with a name: `nameless_file` makes one (O_TMPFILE,
or created and unlinked at once) that is read back through its descriptor and vanishes
with the last process holding it, however that process ends. Each session's directory
(`trace/run-*`, for strace's FIFO) is locked by the session while it may use it; `sweep`,
at the next traced start, removes every directory no live session locks: what a session
killed outright left (an empty directory, a FIFO) and the named output older versions kept.

`write_trace` turns the output into `trace-exec`, `trace-fork`, `trace-net` and
`trace-gap` records:
the supervisor's at the end of the session, and the drain's (trace.drain), once the
survivors it kept tracing are gone, for the execs the session did not record (`late`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpshim.log import eventlog, execlog
from mcpshim.log.execlog import EventRecord, ExecRecord, LogProblem, Record
from mcpshim.paths import Locations
from mcpshim.trace.parse import Event, read_output
from mcpshim.trace.records import (
    ExecRefused,
    FileTracing,
    PortRefused,
    WriteOutside,
    exact_starts,
    find_gaps,
    iso_time,
    shim_helper_pids,
    shim_paths,
    trace_payloads,
)
from mcpshim.trace.strace import Trace, build_trace
from mcpshim.trace.tracedir import lock_dir, log_mark, nameless_file, sweep

__all__ = [
    "TraceParams",
    "lock_dir",
    "log_mark",
    "nameless_file",
    "session_records",
    "summary_payload",
    "sweep",
    "write_trace",
]


@dataclass(frozen=True)
class TraceParams:
    """What turning a session's trace into records takes, beyond the output itself."""

    session: str
    boot_id: str
    root_pid: int
    root_cwd: bytes
    root_start: int | None
    supervisor: int
    tracer_pid: int
    shim_dirs: tuple[bytes, ...]

    def encode(self) -> str:
        """One argument for the drain's command line."""
        doc = {**self.__dict__, "root_cwd": self.root_cwd.hex()}
        doc["shim_dirs"] = [d.hex() for d in self.shim_dirs]
        return json.dumps(doc)

    @classmethod
    def decode(cls, text: str) -> TraceParams:
        doc: dict[str, Any] = json.loads(text)
        doc["root_cwd"] = bytes.fromhex(doc["root_cwd"])
        doc["shim_dirs"] = tuple(bytes.fromhex(d) for d in doc["shim_dirs"])
        return cls(**doc)


def session_records(loc: Locations, mark: tuple[int, int] | None, session: str) -> Iterator[Record]:
    """This session's records, read from where the log ended when the session began."""
    problems: list[LogProblem] = []
    recs: Iterable[Record]
    try:
        st = loc.log_file.stat()
    except OSError:
        return
    if mark is not None and st.st_ino == mark[0] and st.st_size >= mark[1]:
        with loc.log_file.open("rb") as fh:
            fh.seek(mark[1])
            anchors = execlog.Anchors(loc.boot_dir)
            recs = list(execlog.read_stream(fh, loc.log_file.name, loc.spill_dir, problems,
                                            anchors))  # fmt: skip
    else:
        recs = execlog.iter_records(loc, problems)
    for r in recs:
        s = r.session if isinstance(r, ExecRecord) else r.data.get("session")
        if s == session:
            yield r


def _written(records: Iterable[Record]) -> set[tuple[str, Any, Any]]:
    """What trace records of the session the log holds already: (kind, pid, time)."""
    return {
        (r.kind, r.data.get("pid"), r.data.get("time"))
        for r in records
        if isinstance(r, EventRecord)
        and r.kind in ("trace-exec", "trace-fork", "trace-net", "trace-file")
    }


def write_trace(
    loc: Locations,
    output: Path,
    p: TraceParams,
    final: bool,
    live: Mapping[int, int],
    mark: tuple[int, int] | None,
    late: bool = False,
    refused: tuple[ExecRefused | None, PortRefused | None] = (None, None),
    parsed: Mapping[int, Sequence[Event]] | None = None,
    write_outside: WriteOutside | None = None,
    files: FileTracing | None = None,
    counts: dict[str, int] | None = None,
) -> tuple[Trace, int]:
    """Parse the output and append its records; (the trace, how many gaps were found).
    `late` (the drain): only records the log does not hold yet, marked so, and no gaps
    (the session's own check found them, with the family it knew). `refused`: a contained
    session's ruleset (`run --contain`), whose refusals the records say. `parsed`: the
    output's events as they were stored (trace.run parses while the session runs).
    `files`: the file facts are recorded too (trace.filefacts; the drain records none).
    `counts`: filled with the records written, by kind."""
    lines = read_output(output, final=final) if parsed is None else parsed
    trace = build_trace(
        lines, p.root_pid, p.root_cwd, p.root_start, p.supervisor, execlog.now_anchor(),
        execlog.CLK_TCK,
    )  # fmt: skip
    records = list(session_records(loc, mark, p.session))
    exact = exact_starts(records, live)
    skip = _written(records) if late else set()
    exec_refused, port_refused = refused
    found = list(trace_payloads(trace, p.session, p.boot_id, exact, p.shim_dirs,
                                exec_refused, port_refused, shim_paths(records), write_outside,
                                files))  # fmt: skip
    if late:
        found = [(k, d) for k, d in found if (k, d.get("pid"), d.get("time")) not in skip]
        for _kind, payload in found:
            payload["late"] = True  # recorded after the session, by the drain
    eventlog.append_events(loc, found)
    if counts is not None:
        for kind, _payload in found:
            counts[kind] = counts.get(kind, 0) + 1
    if late:
        return trace, 0
    gaps = list(find_gaps(trace, records, exact, {p.tracer_pid}))
    for g in gaps:
        payload = {"session": p.session, "time": iso_time(time.time()), "boot_id": p.boot_id}
        eventlog.append_event(loc, "trace-gap", {**payload, **g})
    return trace, len(gaps)


def summary_payload(
    p: TraceParams, strace: str, trace: Trace, gaps: int, complete: bool,
    files: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The `trace-summary` record of a session's trace as written (trace.store); `files`:
    the `trace-file` records written, None when the file calls were not traced."""
    helper = shim_helper_pids(trace)
    execs = [e for e in trace.execs if e.pid not in helper]
    out: dict[str, Any] = {
        "session": p.session,
        "time": iso_time(time.time()),
        "boot_id": p.boot_id,
        "strace": strace,
        "tracer_pid": p.tracer_pid,
        "processes": len(set(trace.processes) - helper),
        "execs": sum(e.result == "ok" for e in execs),
        "failed": sum(e.result != "ok" for e in execs),
        "gaps": gaps,
        "net": len(trace.net),  # the trace-net records written
        "complete": complete,
    }
    if files is not None:
        out["files"] = files
    return out
