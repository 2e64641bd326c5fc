"""`run --lock L --on-departure terminate`: end the family at its first exec departure.

While the session runs, every executable the family runs is held to the server's approval:
each exec the tracer saw succeed, as its line arrives (`TraceRun.on_exec`: within about
10 ms of strace writing it, whatever the sampling interval), each shim record (read from the
log at each tick) and each process the sampler observed that no shim recorded. One whose
path no card of the server lists (any tool's, or the server's own outside tool calls) is a
departure, and so is an approved path whose content hash is no longer the approved one
(hashed once per path, SHA-256 only). The first departure is recorded (`departure`: what,
the path, the process and its command line, `source` the record that showed it: trace,
shim or observed), then said: one stderr line, and under --mcp an MCP log notification
the relay writes to the client between the server's lines (`Supervisor.say`), so a client
learns why its call will get no answer; then the whole family is terminated
(`Supervisor.terminate_family`, which records each member's evidence before the signals:
SIGTERM, SIGKILL after --grace).

This is containment, not prevention: a departure is seen after its exec, by which time the
program runs. Traced, what runs between the exec and the signal is the few milliseconds
until strace's line is read plus the time to end the family (a program that ignores
SIGTERM: until --grace is over); a program that is done by
then (a `cp`, a copied binary that exits at once) has done its work, and only the record
and the end of the family remain. Untraced (no ptrace, `--no-trace`), a departure is seen
only through a shim record or a sample (`--sample-ms`), and a short-lived exec that
bypasses the shims is not seen at all. Which tool's boundary an exec departs from is
review's business (`review --lock`); here the server's whole approval counts, so an
executable approved for one tool and run by another passes.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcpshim.base.display import escape, json_text
from mcpshim.contract.identity import content_hash
from mcpshim.contract.lockfile import ServerApproval
from mcpshim.log.execlog import ExecRecord
from mcpshim.log.follow import Follower
from mcpshim.log.ledger import sample_is_helper
from mcpshim.log.logview import argv_fields
from mcpshim.proc.procinfo import read_stat, start_ticks
from mcpshim.supervise.session import utc_now
from mcpshim.trace.parse import Event
from mcpshim.trace.selfexe import is_exe_link

if TYPE_CHECKING:
    from mcpshim.supervise.supervisor import Supervisor

__all__ = ["DepartureWatch"]

Ident = tuple[int, int | None]


def _unset(text: str) -> None:
    """No relay: nobody to tell but stderr."""


class DepartureWatch:
    """Installs itself on a supervisor (a tick hook and an event hook)."""

    def __init__(self, sup: Supervisor, server: ServerApproval, lock_path: str) -> None:
        self.sup, self.server, self.lock_path = sup, server, lock_path
        boundaries = [server.startup, *(t.boundary for t in server.tools.values())]
        self.approved = {e.path: e.sha256 for b in boundaries for e in b.executables}
        # The server's own program counts for the server's process only: a helper that
        # happens to be the server's interpreter is still a new program for its tool.
        self.program = {server.program.path: server.program.sha256} if server.program else None
        self.tail = Follower.tail(sup.loc)  # any number of rotations between two ticks
        self._observed: list[dict[str, Any]] = []
        self._recorded: set[Ident] = set()
        self._exe: dict[Ident, str] = {}  # the last executable each process was seen with
        self._hashes: dict[str, str] = {}
        self._own = os.path.realpath(sys.executable)
        self.fired = False
        shims = os.fsencode(sup.loc.shim_dir)
        self._shim_dirs = {shims, os.fsencode(os.path.realpath(shims))}
        sup.on_tick(self.tick)
        sup.on_event(self.on_event)
        sup.say = sup.say or _unset  # the relay (--mcp) sets how the client is told
        if sup.tracer is not None:
            sup.tracer.on_exec(self.traced)

    def on_event(self, kind: str, payload: Mapping[str, Any]) -> None:
        # Held until the next tick: a shim record of the same process may not be read yet.
        if kind == "observed" and not self.fired:
            self._observed.append(dict(payload))

    def tick(self) -> None:
        if self.fired:
            return
        for rec in self.tail.poll():
            if isinstance(rec, ExecRecord) and rec.session == self.sup.session and not self.fired:
                self._shim(rec)
        observed, self._observed = self._observed, []
        for d in observed:
            if not self.fired:
                self._sampled(d)

    def traced(self, ev: Event) -> None:
        """An exec the tracer saw succeed, as its line was read: the program is running (or
        already done); nothing waits for a tick."""
        if self.fired or os.path.dirname(ev.filename) in self._shim_dirs:
            return  # a shim script: its record and its exec of the pinned target follow
        pid = ev.tid
        filename = ev.filename
        if is_exe_link(filename):  # /proc/self/exe: the file it named there, not here
            try:
                filename = os.readlink(f"/proc/{pid}/exe").encode("utf-8", "surrogateescape")
            except OSError:
                filename = b"(an exe link in /proc whose file could not be read)"
        elif not filename.startswith(b"/"):  # relative to its cwd, if it is still there
            with contextlib.suppress(OSError):
                filename = os.path.join(os.readlink(f"/proc/{pid}/cwd").encode(), filename)
        path = filename.decode("utf-8", "surrogateescape")
        start = start_ticks(pid)
        st = read_stat(pid)
        self._exe[(pid, start)] = path
        self._recorded.add((pid, start))  # its samples show this exec, not a new program
        evidence = {
            "pid": pid, "start": start, "ppid": st.ppid if st is not None else None,
            "source": "trace", "exec_time": ev.time,
            **argv_fields("argv", ev.argv if ev.argv is not None else (ev.filename,)),
        }  # fmt: skip
        self._check(path, evidence)

    def _shim(self, rec: ExecRecord) -> None:
        ident = (rec.pid, rec.start)
        self._recorded.add(ident)
        path = rec.target.decode("utf-8", "surrogateescape")
        self._exe[ident] = path
        evidence = {
            "pid": rec.pid, "start": rec.start, "ppid": rec.ppid, "source": "shim",
            "where": rec.where, "cwd": json_text(rec.cwd),
            **argv_fields("argv", (rec.shim.encode(), *rec.args)),
        }  # fmt: skip
        self._check(path, evidence)

    def _sampled(self, d: Mapping[str, Any]) -> None:
        pid, start = d.get("pid"), d.get("start")
        if not isinstance(pid, int):
            return
        ident = (pid, start if isinstance(start, int) else None)
        path = str(d.get("exe") or "")
        if ident in self._recorded or not path:
            return  # what the shim recorded is what ran (an interpreter or mid-exec sample)
        if sample_is_helper(d):
            return  # the shim library's own helper reading a parent's argv: mcpshim's work
        first = ident not in self._exe
        parent = self._exe.get((d.get("ppid"), d.get("parent_start")))  # type: ignore[arg-type]
        pre_exec = pid == self.sup.child_pid and path == self._own
        self._exe[ident] = path
        if pre_exec or (first and parent == path):
            return  # a fork caught before its exec: its parent's image, not a new program
        keep = ("pid", "start", "ppid", "cwd", "cmdline", "cmdline_b64", "uid")
        self._check(path, {**{k: d[k] for k in keep if k in d}, "source": "observed"})

    def _check(self, path: str, evidence: dict[str, Any]) -> None:
        known = self.approved
        if evidence.get("pid") == self.sup.child_pid and self.program is not None:
            known = {**self.approved, **self.program}  # what it was started as, and became
        approved = known.get(path)
        if approved is None:
            self._fire("new executable", path, evidence)
            return
        if not approved:
            return
        now = self._hashes.get(path)
        if now is None:
            now = self._hashes[path] = content_hash(path)
        if now and now != approved:
            self._fire("new identity", path, {**evidence, "approved": approved, "now": now})

    def _fire(self, what: str, path: str, evidence: dict[str, Any]) -> None:
        """Record the departure, say it (one stderr line; under --mcp an MCP log
        notification to the client, between the server's lines), then end the family."""
        self.fired = True
        self.sup.emit(
            "departure",
            {"session": self.sup.session, "time": utc_now(), "what": what, "path": path,
             "server": self.server.name, "lock": self.lock_path, "action": "terminate",
             "boot_id": self.sup.boot_id, **evidence},
        )  # fmt: skip
        who = f"pid {evidence.get('pid')}" if evidence.get("pid") is not None else "a process"
        text = (
            f"mcpshim: departure from {self.lock_path}: {what} {path} ({who}) is not approved "
            f"for {self.server.name}; ending the server's family (--on-departure terminate)"
        )
        print(escape(text), file=sys.stderr, flush=True)
        if self.sup.say is not None:
            with contextlib.suppress(Exception):  # the client's end may be gone: end anyway
                self.sup.say(text)
        self.sup.terminate_family(f"{what}: {path}")
