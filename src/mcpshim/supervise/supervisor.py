"""`mcpshim run`: start a command, hold its whole family, and account for it at the end.

The command is started with posix_spawn in a process group of its own, with stdin, stdout
and stderr inherited as they are: the supervisor never reads, wraps or buffers them, so an
MCP stdio client and server see each other's bytes exactly. On Linux the supervisor is a
child subreaper, so descendants that double-fork or call setsid are re-parented to it
instead of to init: they stay in the family, it reaps them and records their exit.

One thread runs one loop: a selector waits on the signal wakeup pipe (SIGCHLD and the
forwarded SIGINT/SIGTERM/SIGHUP arrive as bytes there, never as work inside a handler) and
on any extra readers (`add_reader`: a later stdio relay or a trace reader), with the sample
interval as its timeout. When the command ends, the family gets a short settle (processes
the server signalled on its way out end moments later); every descendant alive after it
is a survivor, reported or terminated by `containment`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from mcpshim.errors import McpshimError
from mcpshim.log import eventlog, execlog
from mcpshim.log.execlog import ExecRecord
from mcpshim.log.follow import Follower, Mark
from mcpshim.paths import Locations
from mcpshim.proc.procinfo import Stat, proc_fields, start_ticks
from mcpshim.supervise.containment import SETTLE_S, account_survivors, group_members, settle
from mcpshim.supervise.launch import FORWARDED, Launch
from mcpshim.supervise.readers import Readers
from mcpshim.supervise.sampler import Sampler
from mcpshim.supervise.session import SessionStart, end_payload, start_payload, utc_now
from mcpshim.supervise.spawn import SpawnError, set_child_subreaper
from mcpshim.trace.run import TraceRun

if TYPE_CHECKING:
    from mcpshim.sandbox.contained import Containment

__all__ = ["FORWARDED", "OnExit", "RunOptions", "SpawnError", "Supervisor", "set_child_subreaper"]

OnExit = Literal["report", "terminate"]
SOCKET_PASS_MS = 500  # sockets of members already known are looked at this often
TRACE_BATCH_S = 0.01  # the trace FIFO is read at most this often (see _pump_trace)


@dataclass(frozen=True)
class RunOptions:
    name: str = ""
    sample_ms: int = 100
    on_exit: OnExit = "report"
    grace: float = 5.0


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


class Supervisor:
    """One session: spawn, loop, account for survivors, write the records."""

    def __init__(
        self,
        loc: Locations,
        argv: Sequence[str],
        options: RunOptions,
        environ: Mapping[str, str] | None = None,
        tracer: TraceRun | None = None,
        trace_state: str = "",
        zdotdir: str | None = None,
        launch: Launch | None = None,
        mcp: bool = False,
    ) -> None:
        """`launch`: the session as `mcpshim run` started it already (supervise.launch),
        its command running; else one is made here and started by `run`."""
        if not argv:
            raise McpshimError("no command given (mcpshim run -- COMMAND [ARG...])")
        self.loc = loc
        self.argv = list(argv)
        self.options = options
        if launch is None:
            launch = Launch(loc, argv, options.grace, environ, tracer, zdotdir, mcp)
        self.launch = launch
        self.session = launch.session
        self.boot_id = execlog.current_boot_id()
        self.env, self.path = launch.env, launch.path
        self.zdotdir = zdotdir
        self.trace_state = trace_state or ("strace" if tracer is not None else "off")
        self.child_pid = 0
        self.child_pgid = 0
        self.status: int | None = None
        self.subreaper = False
        self._readers = Readers()
        self._tick_hooks: list[Callable[[], None]] = []
        self._spawn_hooks: list[Callable[[], None]] = []
        self._event_hooks: list[Callable[[str, Mapping[str, Any]], None]] = []
        self._old: dict[int, Any] = {}
        self._pending: list[int] = []
        self._tty_pgrp: int | None = None
        self.helpers: dict[int, int | None] = {}  # mcpshim's own children -> exit code
        self.ended_family = False  # terminate_family ended it (a departure)
        self.say: Callable[[str], None] | None = None  # an MCP log line to the client (--mcp)
        self.log_failures = 0
        every = round(SOCKET_PASS_MS / options.sample_ms)
        tail, early = self._tail()
        self.sampler = Sampler(self.session, self.boot_id, os.getpid(), self.emit, tail, every)
        self.sampler.note_shim_records(early)
        self.tracer = tracer  # --trace: the command runs under strace (trace.run)
        if tracer is not None:
            self.on_tick(tracer.tick)
        self.watcher = launch.watcher
        for own in (self.watcher.pid, launch.pumps.pid if launch.pumps else 0):
            if own:
                self.add_helper(own)
        for exc in launch.log_errors:  # what the launch could not record, said once
            self._log_failed(exc)
        # run --contain: the ruleset the command starts in, and what the record says of it
        self.contain: Containment | None = None
        self.contain_record: Mapping[str, Any] | None = None

    # -- extension points -------------------------------------------------------------------

    def _tail(self) -> tuple[Follower, list[ExecRecord]]:
        """The log from where it ended when the command started: a command already
        running (a launch) may have written shim records the sampler must know."""
        if not self.launch.spawned:
            return Follower.tail(self.loc), []
        fol = Follower(self.loc, [], lag=None)
        if not self.loc.log_dir.is_dir():
            return fol, []
        ident, offset = self.launch.mark
        early = fol.start(history=False, since=Mark(ident, offset))
        return fol, [r for r in early if isinstance(r, ExecRecord)]

    def emit(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Append a record; a log that cannot be written (ENOSPC, read-only, its directory
        deleted, its lock unusable) never stops the session: one warning, then the
        command runs on unrecorded and `run` still exits with its status."""
        try:
            eventlog.append_event(self.loc, kind, payload)
        except OSError as exc:
            self._log_failed(exc)
        for hook in self._event_hooks:
            hook(kind, payload)

    def _log_failed(self, exc: OSError) -> None:
        self.log_failures += 1
        if self.log_failures == 1:
            what = f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)
            print(
                f"mcpshim: warning: cannot write the exec log ({what}); "
                "the session goes on without its records",
                file=sys.stderr,
            )

    def on_event(self, hook: Callable[[str, Mapping[str, Any]], None]) -> None:
        """Call `hook(kind, payload)` after each record the supervisor or its sampler writes."""
        self._event_hooks.append(hook)

    def add_reader(self, fd: int, callback: Callable[[int], None]) -> None:
        """Call `callback(fd)` from the loop whenever fd is readable (relays, trace readers);
        `pause_reader` stops watching it for a while (supervise.readers)."""
        self._readers.add(fd, callback)

    def remove_reader(self, fd: int) -> None:
        self._readers.remove(fd)

    def pause_reader(self, fd: int, seconds: float) -> None:
        self._readers.pause(fd, seconds)

    def on_tick(self, hook: Callable[[], None]) -> None:
        self._tick_hooks.append(hook)

    def on_spawn(self, hook: Callable[[], None]) -> None:
        """Call `hook()` once the command runs (e.g. to close the parent's ends of its pipes)."""
        self._spawn_hooks.append(hook)

    def watch(self) -> None:
        """Fork the watcher that ends the family if this process dies mid-session
        (supervise.watcher), and with --mcp open the relay's pipes and announce the
        session: the launch's first steps, before any thread or child of a relay exists.
        Once only."""
        self.launch.begin()
        if self.watcher.pid and self.watcher.pid not in self.helpers:
            self.add_helper(self.watcher.pid)

    def add_helper(self, pid: int) -> None:
        """A child of mcpshim's own (the relay's pumps): never a member of the family, never
        observed, a survivor or reaped in the log; its exit code lands in `helpers`."""
        self.helpers.setdefault(pid, None)
        self.sampler.exclude(pid)
        self.watcher.helper(pid)

    # -- the session ----------------------------------------------------------------------

    def run(self, file_actions: Sequence[tuple[Any, ...]] = ()) -> int:
        launch = self.launch
        if not launch.spawned:
            self.watch()
            spawn = self.contain.spawn if self.contain is not None else None
            launch.spawn(file_actions, spawn)
        started = launch.began
        self.subreaper = launch.subreaper
        wake_r = launch.wake[0]
        self.child_pid = self.child_pgid = launch.child_pid
        for pid, start, code, when in launch.hand_over():  # ended before this loop ran
            self._reaped(pid, start, code, when)
        try:
            self.add_reader(wake_r, self._on_wakeup)
            try:
                self._started()
            except SpawnError as exc:
                self._not_started(exc, started)
                raise
            self.emit("session-start", start_payload(self._start_record()))
            self._loop()
            settle(self._live_family, self._reap_and_pump, SETTLE_S)
            self.sampler.finish()
            survivors, terminated = self._at_exit()
            if self.tracer is not None:
                self.remove_reader(self.tracer.fd)
                self.tracer.finish(self.session, self.boot_id, os.getcwdb())
                self._reap()  # zombies a tracer held until it was done with them
            assert self.status is not None
            took, ended = time.monotonic() - started, terminated or self.ended_family
            self.emit("session-end", end_payload(self.session, self.status, took, survivors, ended))
            return self.status
        finally:
            # Done once the command ended and the family was accounted for; otherwise (an
            # error on the way out) the watcher ends the family, as if this process died.
            # (not waited for: it ends while run records the rest; `close` reaps it)
            self.watcher.finish(done=self.status is not None, wait=False)
            self.sampler.close()
            self._give_back_terminal()
            self.remove_reader(wake_r)
            launch.restore_signals()

    def close(self) -> None:
        """After the session and what run does once it ended: its helpers gone."""
        self.watcher.reap()

    def _not_started(self, exc: SpawnError, started: float) -> None:
        """The command could not be started (traced or not, the shell's status and
        message): the session says so, `sessions` too, and nothing is left of a trace."""
        self.status = exc.exit_code
        if self.tracer is not None:
            self.tracer.discard()
            self.tracer = None
        self.emit("session-start", start_payload(self._start_record()))
        took = time.monotonic() - started
        end = end_payload(self.session, exc.exit_code, took, 0, False, "not-started")
        self.emit("session-end", {**end, "reason": str(exc)})

    def _start_record(self) -> SessionStart:
        return SessionStart(
            session=self.session,
            name=self.options.name,
            command=tuple(os.fsencode(a) for a in self.argv),
            cwd=os.getcwdb(),
            child_pid=self.child_pid,
            child_start=self.launch.child_start,
            boot_id=self.boot_id,
            path=self.path,
            env_names=tuple(self.env),
            subreaper=self.subreaper,
            trace=self.trace_state,
            zdotdir=str(self.zdotdir) if self.zdotdir is not None else "",
            contain=self.contain_record,
        )

    def _started(self) -> None:
        """The command runs (or could not start: said here, as SpawnError): what follows
        its start, in the order it always came."""
        if self.launch.error is not None:
            raise self.launch.error
        self.child_pid = self.child_pgid = self.launch.child_pid
        for hook in self._spawn_hooks:
            hook()
        if self.tracer is not None:
            self.add_reader(self.tracer.fd, self._pump_trace)
            self.sampler.exclude_exe(self.tracer.strace)
            if tracer_pid := self.tracer.attached(self.child_pid):
                self.sampler.exclude(tracer_pid)
            self.tracer.started()
            params = self.tracer.params(self.session, self.boot_id, os.getcwdb())
            self.watcher.trace(params.encode(), self.tracer.strace, str(self.tracer.dir))
        self._hand_terminal(self.child_pgid)

    def _pump_trace(self, fd: int) -> None:
        """strace writes an exec's line in several pieces: one read every TRACE_BATCH_S
        instead of a wakeup per piece (its 1 MiB FIFO holds far more than that)."""
        if self.tracer is not None:
            self.tracer.pump()
            self.pause_reader(fd, TRACE_BATCH_S)

    def _reap_and_pump(self) -> None:
        """Reap, and keep strace's FIFO drained while survivors are contained (a full one
        stops every tracee, the ones being terminated too)."""
        self._reap()
        if self.tracer is not None:
            self.tracer.pump()

    def _hand_terminal(self, pgid: int) -> None:
        """Interactive use: the command's group becomes the terminal's foreground group."""
        try:
            if not os.isatty(0) or os.tcgetpgrp(0) != os.getpgrp():
                return
            old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            try:
                os.tcsetpgrp(0, pgid)
                self._tty_pgrp = os.getpgrp()
            finally:
                signal.signal(signal.SIGTTOU, old)
            os.killpg(pgid, signal.SIGCONT)  # in case it read the terminal before the handover
        except OSError:
            return

    def _give_back_terminal(self) -> None:
        if self._tty_pgrp is None:
            return
        old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            with contextlib.suppress(OSError):
                os.tcsetpgrp(0, self._tty_pgrp)
        finally:
            signal.signal(signal.SIGTTOU, old)
            self._tty_pgrp = None

    # -- the loop -------------------------------------------------------------------------

    def _loop(self) -> None:
        interval = self.options.sample_ms / 1000
        next_tick = time.monotonic()
        while self.status is None:
            now = time.monotonic()
            if now >= next_tick:
                self._tick()
                next_tick = max(next_tick + interval, time.monotonic())
                continue
            self._readers.wait(next_tick)
            self._reap()

    def _tick(self) -> None:
        self.sampler.tick()
        for hook in self._tick_hooks:
            hook()

    def _on_wakeup(self, fd: int) -> None:
        with contextlib.suppress(BlockingIOError):
            while data := os.read(fd, 512):
                for signum in data:
                    if signum != signal.SIGCHLD:
                        self._forward(signum)
        self._reap()

    def _forward(self, signum: int) -> None:
        if self.status is None and self.child_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.child_pid, signum)

    def _reap(self) -> None:
        """Collect every exited child; the command's status ends the loop, others are recorded."""
        peek = hasattr(os, "waitid") and hasattr(os, "WNOWAIT")
        while True:
            try:
                if peek:
                    info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                    if info is None:
                        return
                    pid = info.si_pid
                    start = start_ticks(pid)  # a zombie's stat is still there
                    _, status = os.waitpid(pid, 0)
                else:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                    if pid == 0:
                        return
                    m = self.sampler.members.get(pid)
                    start = m.stat.start if m else None
            except ChildProcessError:
                return
            self._reaped(pid, start, _exit_code(status), utc_now())

    def _reaped(self, pid: int, start: int | None, code: int, when: str) -> None:
        if pid in self.helpers:
            self.helpers[pid] = code
        elif pid == self.child_pid:
            self.status = code
        else:
            self.emit("reaped", {"session": self.session, "time": when, "boot_id": self.boot_id,
                                 "pid": pid, "start": start, "status": code})  # fmt: skip

    def terminate_family(self, reason: str) -> int:
        """End the whole family now, the command too (a departure under --on-departure
        terminate): each member's evidence is recorded first (`terminated`), then SIGTERM,
        SIGKILL after the grace period. The loop then ends as the command's exit is reaped."""
        self.ended_family = True
        group = None if self.subreaper else self.child_pgid
        procs, _ = account_survivors(self._live_family, True, self.options.grace, self._reap, group)
        for info, action in procs:
            self.emit(
                "terminated",
                {"session": self.session, "time": utc_now(), "boot_id": self.boot_id,
                 **proc_fields(info), "action": action, "reason": reason},
            )  # fmt: skip
        return len(procs)

    # -- at exit --------------------------------------------------------------------------

    def _live_family(self) -> dict[int, Stat]:
        self._reap()
        family = self.sampler.survey()
        if not self.subreaper:
            family.update(group_members(self.child_pgid, exclude=os.getpid()))
        return {p: st for p, st in family.items() if st.state != "Z"}

    def _at_exit(self) -> tuple[int, bool]:
        """Record every survivor (evidence first), then terminate them if asked."""
        survivors, terminated = account_survivors(
            self._live_family,
            self.options.on_exit == "terminate",
            self.options.grace,
            self._reap_and_pump,
            None if self.subreaper else self.child_pgid,
        )
        for info, action in survivors:
            self.emit(
                "survivor",
                {"session": self.session, "time": utc_now(), "boot_id": self.boot_id,
                 **proc_fields(info), "action": action},
            )  # fmt: skip
        return len(survivors), terminated


if sys.platform == "win32":  # pragma: no cover
    raise ImportError("mcpshim run needs a POSIX system")
