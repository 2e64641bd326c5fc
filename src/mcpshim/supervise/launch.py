"""`mcpshim run` up to its server's start, and no further: what the server needs before it
runs, in the order it needs it, on the fewest modules.

A client waits for its server's first byte, and `run` is between them: everything `run`
does before it spawns the server is added to that wait, everything after runs beside the
server's own start-up (Playwright's MCP server takes 0.6 s to answer `initialize`; an SDK
server in Python 0.3 s). So the session id and the command's environment, the watcher
(holding a traced session's FIFO and output from its fork on: trace.run.handover), the
relay's pipes and the session's `mcp-session` record (attribution keys on it: it precedes
every record of the family), the subreaper, the signal wakeup and the spawn itself happen
here, and the supervisor, the sampler, the relay's children, the session-start record and
the rest of the command line come once the server runs (`Supervisor.run` adopts a started
`Launch`). A prelaunch announces the session while strace's probe runs, then forks the
watcher with the trace it keeps (it closes the relay's pipes it inherits at once).

`mcpshim run` as the process's entry point (`mcpshim.__main__`) starts its server from
here before click and the rest of the command line are imported (`prelaunch`): about 0.3
s before the full command line would have. On the way, nothing heavier than os, signal
and select loads (pathlib, re, typing, dataclasses, json and platformdirs were 40 ms of
the 55 before the spawn: design.md, "Supervision: `mcpshim run`"); the session's
Locations, RunArgs and the rest come once the server runs. Only a command line this
parser understands exactly as click does takes that way (`runparse`: a test holds the
two to the same options); anything else, an option it does not handle (--lock,
--enforce, --contain, --otlp, --help), a value click would refuse, a command not found,
is left to click, which starts the session the same way, later. `adopt` hands the
started launch to the command click parsed, which checks it was started for the same
options.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from mcpshim.base.pathsearch import which
from mcpshim.errors import McpshimError
from mcpshim.proc.ticks import start_of
from mcpshim.relay.ends import iso
from mcpshim.shim.rundirs import RunDirs, located, run_dirs
from mcpshim.supervise import runparse
from mcpshim.supervise.childenv import child_environment, new_session_id
from mcpshim.supervise.spawn import SpawnError, posix_spawn, runnable, set_child_subreaper
from mcpshim.supervise.watcher import Watcher

TYPE_CHECKING = False
if TYPE_CHECKING:  # what loads here delays the server's start: the standard library's few
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from mcpshim.paths import Locations
    from mcpshim.relay.child import Pumps
    from mcpshim.supervise.runargs import RunArgs
    from mcpshim.trace.run import TraceRun

    Spawn = Callable[[str, list[str], dict[str, str], Any], int]

__all__ = ["FORWARDED", "Launch", "SpawnError", "adopt", "prelaunch", "set_child_subreaper"]

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: how long a prelaunched `run --mcp` waits for its server's first output before it loads
#: the rest (Playwright's MCP server answers `initialize` in 0.6 s, 1.2 s on a busy machine)
FIRST_OUTPUT_S = 2.0
_TRACE_LOOK_S = 0.02  # how often strace's FIFO is looked at meanwhile
_WATCH_S = 0.01  # keep_watch: how long a child may wait to be reaped, at most
_TRACE_WAITING = 256 << 10  # of its 1 MiB: strace waits for a reader beyond that
LINUX = sys.platform.startswith("linux")


def _noop(signum: int, frame: Any) -> None:
    """A handler at all is what makes the signal reach the wakeup pipe."""


class Launch:
    """One session's start: its id and environment, then (`spawn`) the server running.

    `spawn` forks the watcher, opens the relay's pipes and announces the session (`mcp`),
    becomes the subreaper, routes SIGCHLD and the forwarded signals to a wakeup pipe, marks
    where the log ends, and starts the command (under strace when `tracer`). A command that
    cannot start is kept as `error` for the supervisor to raise where it always has."""

    def __init__(
        self,
        loc: Locations | RunDirs,
        argv: Sequence[str],
        grace: float,
        environ: Mapping[str, str] | None = None,
        tracer: TraceRun | None = None,
        zdotdir: str | None = None,
        mcp: bool = False,
    ) -> None:
        self.where = loc  # the start needs strings of it (a prelaunch's RunDirs)
        self.argv = list(argv)
        self.tracer = tracer
        self.mcp = mcp
        self.session = new_session_id()
        self.env, self.path = child_environment(
            os.environ if environ is None else environ, loc.shim_dir, self.session, zdotdir
        )
        self.zdotdir = zdotdir
        self.watcher = Watcher(self.session, grace, loc)
        self.pipes: tuple[int, int, int, int] | None = None  # in_r, in_w, out_r, out_w
        self.child_pid = 0
        self.child_start: int | None = None
        self.spawned = False
        self.error: SpawnError | None = None
        self.subreaper = False
        self.wake: tuple[int, int] = (-1, -1)
        self.began = 0.0  # monotonic, when the session began
        self.mark: tuple[tuple[int, int] | None, int] = (None, 0)  # the log's end then
        self.log_errors: list[OSError] = []
        self._old: dict[int, Any] = {}
        self._server_ends_open = False
        self.pumps: Pumps | None = None  # the relay's pump child, started with the server
        self.args: RunArgs | None = None  # prelaunch: what it was started for
        self.why_not = ""  # prelaunch: why it runs untraced where it would trace
        self._watching: Any = None  # keep_watch's thread
        self.reaped: list[tuple[int, int | None, int, str]] = []
        self.command_ended = False

    @property
    def loc(self) -> Locations:
        """The session's paths.Locations (made from a prelaunch's RunDirs once asked)."""
        return located(self.where)

    # -- before the spawn -----------------------------------------------------------------

    def begin(self) -> None:
        """The watcher (keeping a traced session's FIFO and output: a `run` killed
        mid-session keeps its trace), then (with `mcp`) the relay's pipes and the session's
        announcement."""
        if self.began:
            return
        self.began = time.monotonic()
        if self.tracer is not None:
            self.watcher.trace_fds = self.tracer.handover()
        self.watcher.start()
        if self.mcp:
            self.relay_pipes()

    def relay_pipes(self) -> tuple[int, int, int, int]:
        """The relay's pipes (in_r, in_w, out_r, out_w; of the default size: relay.core's
        relay_pipe), opened with the session's `mcp-session` record: a session announces
        itself as relayed before any of its processes run (attribution keys on it)."""
        if self.pipes is None:
            if self.spawned:
                raise McpshimError("the relay's pipes come before the command starts")
            in_r, in_w = os.pipe()
            out_r, out_w = os.pipe()
            self.pipes = (in_r, in_w, out_r, out_w)
            self._server_ends_open = True
            self.emit("mcp-session", {"session": self.session, "time": iso(time.time()),
                                      "transport": "stdio"})  # fmt: skip
        return self.pipes

    def emit(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Append a record; a log that cannot be written is the supervisor's to say."""
        from mcpshim.log import eventlog

        try:
            eventlog.append_event(self.where, kind, payload)
        except OSError as exc:
            self.log_errors.append(exc)

    def spawn(
        self, file_actions: Sequence[tuple[Any, ...]] = (), spawn: Spawn | None = None
    ) -> int:
        """Start the command; its pid (0 when it could not start: `error` says why)."""
        self.begin()
        self.subreaper = set_child_subreaper()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        self.wake = (wake_r, wake_w)
        self._install_signals(wake_w)
        self.mark = _log_end(self.where)
        actions = list(file_actions)
        if self.pipes is not None and not actions:
            in_r, _, _, out_w = self.pipes
            actions = [(os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_DUP2, out_w, 1)]
        self.spawned = True
        try:
            self.child_pid = self._spawn(actions, spawn or posix_spawn)
        except SpawnError as exc:
            self.error = exc
            return 0
        finally:
            self.close_server_ends()
        self.watcher.command(self.child_pid)
        self.child_start = start_of(self.child_pid)  # read while it surely lives
        if self.tracer is not None:  # at once too: strace's tracer, while the command runs
            self.tracer.attached(self.child_pid)
        return self.child_pid

    def _spawn(self, actions: list[tuple[Any, ...]], spawn: Spawn) -> int:
        cmd = self.argv[0]
        path = cmd if "/" in cmd else which(cmd, self.path)
        if path is None:
            raise SpawnError(f"{cmd}: command not found on PATH {self.path}", 127)
        runnable(cmd, path)  # before strace, which would say it its own way (exit 1)
        spawn_path, spawn_argv = path, self.argv
        if self.tracer is not None:
            spawn_path, spawn_argv = self.tracer.strace, self.tracer.wrap(self.argv)
        try:
            return spawn(spawn_path, spawn_argv, self.env, actions)
        except FileNotFoundError as exc:
            raise SpawnError(f"{cmd}: {exc.strerror}", 127) from None
        except OSError as exc:
            raise SpawnError(f"{cmd}: cannot run: {exc.strerror}", 126) from None

    def start_pumps(self) -> None:
        """The relay's pump child, on the pipes the server holds (Linux): what the server
        writes reaches the client from now on; the copies wait for the recorder, which
        the supervisor forks once it is set up (relay.forked). Elsewhere, or when the fork
        fails, the relay starts with the supervisor, as it always did."""
        from mcpshim.relay import child as relaychild

        if self.pipes is None or self.pumps is not None or not relaychild.available():
            return
        _, in_w, out_r, _ = self.pipes
        try:
            self.pumps = relaychild.start_pumps(0, in_w, out_r, 1)
        except OSError:
            pass

    def wait_for_server(self, limit: float) -> None:
        """Until the server's first output has reached the client (the bell), a signal or
        a child's end comes, strace's output waits in quantity, or `limit` passes: what
        the rest of `run` loads and sets up takes CPU the server's start-up needs (on a
        busy machine it made the first answer later by as much)."""
        if self.pumps is None:
            return
        import select

        poll = select.poll()
        poll.register(self.pumps.bell, select.POLLIN)
        poll.register(self.wake[0], select.POLLIN)
        deadline = time.monotonic() + limit
        while (left := deadline - time.monotonic()) > 0:
            if poll.poll(min(left, _TRACE_LOOK_S) * 1000):
                return
            if self.tracer is not None and self.tracer.waiting() >= _TRACE_WAITING:
                return  # strace stops every tracee once its FIFO is full

    def keep_watch(self) -> None:
        """Until the supervisor's loop takes over (`hand_over`), a thread does what the loop
        would: forwards SIGINT, SIGTERM and SIGHUP to the command and reaps what ends, with
        the time it did (a child reaped once the rest of `run` had loaded read as a process
        that outlived the tool call it ran in)."""
        import threading

        if self._watching is not None or not self.child_pid:
            return
        self._halt = threading.Event()
        self._watching = threading.Thread(target=self._watch_loop, name="mcpshim-launch",
                                          daemon=True)  # fmt: skip
        self._watching.start()

    def _watch_loop(self) -> None:
        import select

        poll = select.poll()
        poll.register(self.wake[0], select.POLLIN)
        while not self._halt.is_set():
            if poll.poll(_WATCH_S * 1000):
                try:
                    wakes = os.read(self.wake[0], 512)
                except OSError:
                    wakes = b""
                for signum in wakes:
                    if signum != signal.SIGCHLD and not self.command_ended:
                        try:
                            os.kill(self.child_pid, signum)
                        except ProcessLookupError:
                            pass
            self._reap()

    def _reap(self) -> None:
        from mcpshim.supervise.session import utc_now

        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                if info is None:
                    return
                start = start_of(info.si_pid)  # a zombie's stat is still there
                pid, status = os.waitpid(info.si_pid, 0)
            except ChildProcessError:
                return
            code = os.waitstatus_to_exitcode(status)
            self.reaped.append((pid, start, 128 - code if code < 0 else code, utc_now()))
            self.command_ended = self.command_ended or pid == self.child_pid

    def hand_over(self) -> list[tuple[int, int | None, int, str]]:
        """Stop the thread of `keep_watch`; what it reaped: (pid, start, status, UTC time)."""
        if self._watching is not None:
            self._halt.set()
            self._watching.join()
            self._watching = None
        reaped, self.reaped = self.reaped, []
        return reaped

    def close_server_ends(self) -> None:
        """The server's ends of the relay's pipes, once it holds them: held here, they would
        keep its stdin from ever seeing the client go and its stdout from ending."""
        if self._server_ends_open and self.pipes is not None:
            self._server_ends_open = False
            for fd in (self.pipes[0], self.pipes[3]):
                try:
                    os.close(fd)
                except OSError:
                    pass

    # -- signals ----------------------------------------------------------------------------

    def _install_signals(self, wake_w: int) -> None:
        for sig in (*FORWARDED, signal.SIGCHLD):
            old = signal.getsignal(sig)
            self._old[sig] = old
            if old is signal.SIG_IGN and sig != signal.SIGCHLD:
                continue  # ignored by whoever started us: the command inherits that
            signal.signal(sig, _noop)
        self._old[-1] = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)

    def restore_signals(self) -> None:
        old_fd = self._old.pop(-1, -1)
        if self._old:
            signal.set_wakeup_fd(old_fd)
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()
        for fd in self.wake:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.wake = (-1, -1)


def _log_end(loc: Locations | RunDirs) -> tuple[tuple[int, int] | None, int]:
    """Where the live log ends (log.follow.mark): what a follower made later reads from."""
    try:
        st = os.stat(loc.log_file)
    except OSError:
        return None, 0
    return (st.st_dev, st.st_ino), st.st_size


# ---- the process's own `mcpshim run` ------------------------------------------------------

_LAUNCHED: list[Launch] = []


def prelaunch(argv: Sequence[str]) -> Launch | None:
    """Start the session of `mcpshim run ARGV` now, if the parser takes ARGV (Linux only);
    `adopt` gives it to the command click parses next. None: click starts it, later."""
    if not LINUX:
        return None
    args = runparse.parse(argv)
    if args is None:
        return None
    from mcpshim.shim import zdotdir as zdotdir_mod

    try:
        dirs = run_dirs(args["shim_dir"], args["log_dir"])
        cmd = args["command"][0]
        if "/" not in cmd and which(cmd, _session_path(dirs)) is None:
            return None  # click's run says it (exit 127), with nothing recorded first
        zdir = zdotdir_mod.ensure(dirs.shim_dir) if args["zdotdir"] else None
        traced: Callable[[], tuple[TraceRun | None, str]] = _untraced
        if args["trace"] != "off":  # strace's probe runs while the session announces itself
            from mcpshim.trace import prepare as trace_prepare

            traced = trace_prepare.prepare_meanwhile(dirs, args["trace"], os.environ.get("PATH"))
    except (McpshimError, OSError):
        return None  # click's run meets it again, and says it as it always has
    launch = Launch(dirs, args["command"], args["grace"], zdotdir=zdir, mcp=args["mcp"])
    if args["mcp"]:
        launch.relay_pipes()  # announced while the probe runs
    launch.tracer, launch.why_not = traced()
    launch.begin()  # the watcher, which keeps the trace's FIFO and output from its fork on
    launch.spawn()
    _LAUNCHED.append(launch)
    from mcpshim.supervise.runargs import RunArgs

    launch.args = RunArgs.of(args)
    if launch.child_pid:
        launch.start_pumps()
        launch.wait_for_server(FIRST_OUTPUT_S)
        launch.keep_watch()
    return launch


def _untraced() -> tuple[TraceRun | None, str]:
    return None, ""


def _session_path(loc: RunDirs) -> str:
    """The PATH the command gets (child_environment's), to find it on."""
    return child_environment(os.environ, loc.shim_dir, "")[1]


def adopt(args: RunArgs | None) -> Launch | None:
    """The launch prelaunch started, for the command click parsed (`args`; None: options
    a prelaunch never takes); None when there is none. A launch started for other options
    is a bug: said, and the session ends (its watcher ends the family as the process
    exits)."""
    if not _LAUNCHED:
        return None
    launch = _LAUNCHED.pop()
    if launch.args != args:
        raise McpshimError(f"run started for {launch.args}, but the command line says {args}")
    return launch
