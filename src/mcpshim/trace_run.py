"""Running strace for `mcpshim run --trace`: the capability probe, the tracer's life, the records.

The probe runs the exact command line the session will use on `/bin/true` before the
server starts, so a missing strace, a yama ptrace_scope that forbids it or a container's
seccomp profile is found while there is still time to refuse (plain --trace: exit 2 with the
reason and the fix) or to fall back (--trace=auto: shims plus sampling, and a
`trace-fallback` record that says why).

At the end of the session the per-thread files are parsed and written to the log as one
`trace-exec` record per exec attempt (failed ones too), `trace-fork` for processes that
never exec'd, `trace-gap` for family members no record explains, and `trace-summary`.
Identity follows the shims: (boot id, pid, start ticks). A start read from /proc while the
process lived is exact; otherwise it is derived from the fork's timestamp and snapped to an
exact start the log holds for that pid (shim record, sampler) within one tick.

The tracer is never detached while tracees live: strace's seccomp filter stays in them and
would make their execve/fork fail with ENOSYS. Survivors left running (`--on-exit report`)
keep their tracer; the summary says so and where the unparsed rest of the trace stays.

strace writes raw, unredacted argv to its output file, in a 0700 directory under the log
dir; the file is deleted as soon as it is parsed. It stays only in that survivors case
(use `--on-exit terminate` with --trace to leave nothing behind).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mcpshim import execlog
from mcpshim.display import b64_fields, json_text
from mcpshim.errors import UsageError
from mcpshim.execlog import EventRecord, ExecRecord, LogProblem, Record
from mcpshim.paths import Locations
from mcpshim.procinfo import start_ticks
from mcpshim.redact import redact_argv
from mcpshim.shims import unsafe_reason
from mcpshim.tracer import ExecAttempt, Process, Trace, build_trace, read_output, strace_argv

__all__ = [
    "TraceRun",
    "exec_payloads",
    "fallback_payload",
    "find_strace",
    "is_gone",
    "prepare",
    "probe",
    "require_trace",
    "trace_unavailable",
    "tracer_of",
]

_FIX = "or use --trace=auto to run without it (shims plus sampling)"


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat()


def find_strace(path: str | None) -> tuple[str | None, str]:
    """strace on PATH, refused when it sits where others can replace it."""
    found = shutil.which("strace", path=path)
    if found is None:
        return None, (
            f"strace is not installed or not on PATH ({path or ''}); install it "
            f"(Debian/Ubuntu: apt-get install strace; Fedora: dnf install strace) {_FIX}"
        )
    found = os.path.abspath(found)
    bad = unsafe_reason(found)
    if bad:
        return None, f"refusing {found}: {bad}; install strace in a root-owned directory {_FIX}"
    return found, ""


def probe(strace: str, timeout: float = 20.0) -> str:
    """'' when strace can trace a child here, else why not (its own words)."""
    true = shutil.which("true", path="/usr/bin:/bin") or "/bin/true"
    with tempfile.TemporaryDirectory(prefix="mcpshim-probe-") as d:
        output = Path(d) / "trace"
        try:
            proc = subprocess.run(
                strace_argv(strace, str(output), [true]),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{strace} could not run: {exc}"
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        traced = any(ev.kind == "exec" for evs in read_output(output).values() for ev in evs)
        if proc.returncode == 0 and traced:
            return ""
        why = err[0] if err else f"exit status {proc.returncode}, no exec traced"
        return f"strace cannot trace a child process here: {why}"


def trace_unavailable(path: str | None) -> tuple[str | None, str]:
    """(strace, '') when --trace can work, else (None, the reason and the fix)."""
    if not sys.platform.startswith("linux"):
        return None, f"--trace needs Linux and strace (this is {sys.platform}) {_FIX}"
    strace, why = find_strace(path)
    if strace is None:
        return None, why
    why = probe(strace)
    if why:
        return None, (
            f"{why}. ptrace is forbidden here: check /proc/sys/kernel/yama/ptrace_scope "
            "(0 or 1 lets a process trace its own children), a container's seccomp profile "
            "or capabilities (docker: --cap-add SYS_PTRACE), or a no-new-privileges/seccomp "
            f"policy around mcpshim, {_FIX}"
        )
    return strace, ""


def require_trace(path: str | None) -> str:
    """For plain --trace: strace's path, or a UsageError that says why and how to fix it."""
    strace, why = trace_unavailable(path)
    if strace is None:
        raise UsageError(f"--trace: {why}")
    return strace


def prepare(loc: Locations, mode: str, path: str | None) -> tuple[TraceRun | None, str]:
    """For `mcpshim run --trace[=auto]`: (the trace run, '') or, for auto, (None, why not).

    Plain --trace raises a UsageError (exit 2) before anything starts."""
    if mode == "off":
        return None, ""
    strace, why = trace_unavailable(path)
    if strace is None:
        if mode != "auto":
            raise UsageError(f"--trace: {why}")
        return None, why
    return TraceRun(loc, strace), ""


def fallback_payload(session: str, boot_id: str, reason: str) -> dict[str, Any]:
    return {"session": session, "time": _iso(time.time()), "boot_id": boot_id,
            "reason": reason, "using": "shims and sampling"}  # fmt: skip


# ---- records -----------------------------------------------------------------------------


def _bytes_field(name: str, value: bytes | None) -> dict[str, Any]:
    if value is None:
        return {name: None}
    return {name: json_text(value), **b64_fields({name: value})}


def exec_payloads(
    trace: Trace,
    session: str,
    boot_id: str,
    exact: Mapping[int, Sequence[int]],
    shim_dirs: Sequence[bytes] = (),
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The log records of one trace: (kind, payload), in time order; argv redacted.

    A shim's exec is two traced execs in one process: the shim script (its path is in a shim
    dir: `shim_script`), then the target the shim exec's (`via_shim`: the shim's name)."""
    starts = {pid: _snap(p.start, exact.get(pid, ())) for pid, p in trace.processes.items()}
    for pid, st in exact.items():
        if pid not in starts and len(st) == 1:
            starts[pid] = st[0]
    last_ok = {e.pid: e for e in trace.execs if e.result == "ok"}
    prev_script: dict[int, bytes] = {}
    for e in trace.execs:
        payload = _exec_payload(e, trace, session, boot_id, starts, last_ok.get(e.pid))
        if e.result == "ok":
            script = prev_script.pop(e.pid, None)
            if os.path.dirname(e.filename) in shim_dirs:
                payload["shim_script"] = True
                prev_script[e.pid] = e.filename
            elif script is not None:
                payload["via_shim"] = os.path.basename(script).decode("utf-8", "replace")
        yield "trace-exec", payload
    for p in trace.processes.values():
        if p.exec_count == 0 and not any(e.pid == p.pid for e in trace.execs):
            yield (
                "trace-fork",
                {
                    "session": session,
                    "time": _iso(p.time),
                    "boot_id": boot_id,
                    "pid": p.pid,
                    "ppid": p.ppid,
                    "start": starts[p.pid],
                    "parent_start": starts.get(p.ppid) if p.ppid is not None else None,
                    **_bytes_field("cwd", p.cwd),
                    "exit_status": p.status,
                    "signal": p.signal or None,
                },
            )


def _snap(derived: int | None, exact: Sequence[int]) -> int | None:
    if derived is None:
        return exact[0] if len(exact) == 1 else None
    close = [s for s in exact if abs(s - derived) <= 1]
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
        "time": _iso(e.time),
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
    if red.rules:
        out["argv_redacted"] = sorted(set(red.rules))
    if e.truncated:
        out["argv_truncated"] = True
    if e.tid != e.pid:
        out["tid"] = e.tid
    if last is e and p.signal:
        out["signal"] = p.signal
    return out


# ---- the run -----------------------------------------------------------------------------


class TraceRun:
    """One traced session: wraps the command, follows the tracer, writes the records."""

    def __init__(self, loc: Locations, strace: str) -> None:
        self.loc = loc
        self.strace = strace
        loc.log_dir.mkdir(parents=True, exist_ok=True)
        base = loc.log_dir / "trace"
        base.mkdir(mode=0o700, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix="run-", dir=base))
        self.output = self.dir / "strace.out"
        self.tracer_pid = 0
        self.root_pid = 0
        self.root_start: int | None = None
        self._live: dict[int, int] = {}  # start ticks read from /proc while a process lived
        self._offset = 0
        self._log_mark = _log_mark(loc)

    def wrap(self, command: Sequence[str]) -> list[str]:
        return strace_argv(self.strace, str(self.output), command)

    def attached(self, child_pid: int, timeout: float = 10.0) -> int:
        """The tracer's pid (from the child's TracerPid), once strace holds the child."""
        self.root_pid = child_pid
        self.root_start = start_ticks(child_pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = tracer_of(child_pid)
            if pid:
                self.tracer_pid = pid
                return pid
            if pid is None:
                return 0  # the child is gone already
            time.sleep(0.001)
        return 0

    def tick(self, budget: int = 1 << 22) -> None:
        """Read the exact start of every process that appeared in the output since the last
        tick and is still alive (a derived start can be one tick off)."""
        try:
            with self.output.open("rb") as fh:
                fh.seek(self._offset)
                data = fh.read(budget)
        except OSError:
            return
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].splitlines():
            pid = line[: line.find(b" ")]
            if pid.isdigit() and int(pid) not in self._live:
                st = start_ticks(int(pid))
                if st is not None:
                    self._live[int(pid)] = st

    def _tracer_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(ChildProcessError):
                pid, _ = os.waitpid(self.tracer_pid, os.WNOHANG)
                if pid == 0 and time.monotonic() < deadline:
                    time.sleep(0.005)
                    continue
                return pid != 0
            return not os.path.exists(f"/proc/{self.tracer_pid}") or is_gone(self.tracer_pid)

    def finish(self, session: str, boot_id: str, root_cwd: bytes) -> dict[str, Any]:
        """Wait for the tracer (not for survivors it still holds), parse, write the records."""
        self.tick()
        complete = self.tracer_pid == 0 or self._tracer_gone(0.3)
        if not complete:
            # Tracees still alive (survivors): wait longer only if none of them are.
            files = read_output(self.output, final=False)
            alive = [t for t in files if os.path.exists(f"/proc/{t}") and not is_gone(t)]
            complete = self._tracer_gone(0.1 if alive else 5.0)
        files = read_output(self.output, final=complete)
        trace = build_trace(
            files, self.root_pid, root_cwd, self.root_start, os.getpid(),
            execlog.now_anchor(), execlog.CLK_TCK,
        )  # fmt: skip
        records = list(_session_records(self.loc, self._log_mark, session))
        exact = _exact_starts(records, self._live)
        n_exec = 0
        shim_dirs = [
            os.fsencode(self.loc.shim_dir),
            os.fsencode(os.path.realpath(self.loc.shim_dir)),
        ]
        for kind, payload in exec_payloads(trace, session, boot_id, exact, shim_dirs):
            execlog.append_event(self.loc, kind, payload)
            n_exec += kind == "trace-exec"
        gaps = list(find_gaps(trace, records, exact, {self.tracer_pid}))
        for g in gaps:
            now = _iso(time.time())
            payload = {"session": session, "time": now, "boot_id": boot_id, **g}
            execlog.append_event(self.loc, "trace-gap", payload)
        summary: dict[str, Any] = {
            "session": session,
            "time": _iso(time.time()),
            "boot_id": boot_id,
            "strace": self.strace,
            "processes": len(trace.processes),
            "execs": sum(e.result == "ok" for e in trace.execs),
            "failed": sum(e.result != "ok" for e in trace.execs),
            "gaps": len(gaps),
            "complete": complete,
        }
        if complete:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            summary["pending_dir"] = str(self.dir)
            summary["note"] = (
                "the tracer stays attached to surviving processes (detaching would make their "
                "fork/exec fail); their later execs stay in pending_dir, not in the log"
            )
        execlog.append_event(self.loc, "trace-summary", summary)
        return summary


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
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return data[data.rfind(b")") + 2 :][:1] in (b"Z", b"X")


def _log_mark(loc: Locations) -> tuple[int, int] | None:
    try:
        st = loc.log_file.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size


def _session_records(
    loc: Locations, mark: tuple[int, int] | None, session: str
) -> Iterator[Record]:
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


def _exact_starts(records: Iterable[Record], live: Mapping[int, int]) -> dict[int, list[int]]:
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
        known.setdefault(p.pid, []).append(_snap(p.start, exact.get(p.pid, ())))
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
