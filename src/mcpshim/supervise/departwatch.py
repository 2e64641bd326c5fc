"""`run --lock L --on-departure terminate`: end the family at its first exec departure.

While the session runs, every executable the family runs is held to the server's approval:
each shim record (read from the log, as the sampler reads it) and each process the sampler
observed that no shim recorded. One whose path no card of the server lists (any tool's, or
the server's own outside tool calls) is a departure, and so is an approved path whose
content hash is no longer the approved one (hashed once per path, SHA-256 only). The first
departure is recorded (`departure`: what, the path, the process and its command line, the
record that showed it), then the whole family is terminated (`Supervisor.terminate_family`,
which records each member's evidence before the signals).

This is containment, not prevention: a departure is seen when its record is read, within a
sampling interval of the exec, by which time the program has started. Which tool's boundary
an exec departs from is review's business (`review --lock`); here the server's whole
approval counts, so an executable approved for one tool and run by another passes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcpshim.base.display import json_text
from mcpshim.contract.identity import content_hash
from mcpshim.contract.lockfile import ServerApproval
from mcpshim.log.execlog import ExecRecord
from mcpshim.log.follow import Follower
from mcpshim.log.logview import argv_fields
from mcpshim.supervise.session import utc_now

if TYPE_CHECKING:
    from mcpshim.supervise.supervisor import Supervisor

__all__ = ["DepartureWatch"]

Ident = tuple[int, int | None]


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
        self._shimmed: set[Ident] = set()
        self._exe: dict[Ident, str] = {}  # the last executable each process was seen with
        self._hashes: dict[str, str] = {}
        self._own = os.path.realpath(sys.executable)
        self.fired = False
        sup.on_tick(self.tick)
        sup.on_event(self.on_event)

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

    def _shim(self, rec: ExecRecord) -> None:
        ident = (rec.pid, rec.start)
        self._shimmed.add(ident)
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
        if ident in self._shimmed or not path:
            return  # what the shim recorded is what ran (an interpreter or mid-exec sample)
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
        self.fired = True
        self.sup.emit(
            "departure",
            {"session": self.sup.session, "time": utc_now(), "what": what, "path": path,
             "server": self.server.name, "lock": self.lock_path, "action": "terminate",
             **evidence},
        )  # fmt: skip
        self.sup.terminate_family(f"{what}: {path}")
