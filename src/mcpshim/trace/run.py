"""Running strace for `mcpshim run --trace`: the tracer's life and what it leaves in the log.

Whether strace can trace here is asked before the server starts (trace.prepare); up to
`wrap` a TraceRun is set up then too, on few modules: the parser, the records and the
process readers load when the output is first read. The output is parsed as it is stored;
at the session's end its records are written (trace.records: `trace-exec`, `trace-fork`,
`trace-net`, `trace-gap`), then a `trace-summary`. Exact starts are read from /proc as
processes appear in the trace.

strace prints the whole environment of every exec (-v), secrets included, so its output
never goes to a file: strace writes into a FIFO (in a 0700 directory, unlinked as soon as
strace holds it) that the supervisor's loop drains (`pump`), cutting each exec's
environment down to PATH and every send's bytes out (parse.sanitize) before anything is
written. The sanitized lines still hold every argument as the command got it, so they go
to a file that has no name (O_TMPFILE, or unlinked at once): it is read back through its
descriptor and goes with the last process that holds it. A session killed outright
(SIGKILL, the OOM killer) leaves no trace output behind; its empty directory, and whatever
an older version left in one, is removed by the next traced session (`sweep`: a directory
whose session still runs is locked by it).

The tracer is never detached while tracees live: strace's seccomp filter stays in them and
would make their execve/fork fail with ENOSYS. Survivors left running (`--on-exit report`)
keep their tracer; a small drain process (trace.drain) takes over the FIFO and the nameless
file, so strace never blocks, goes on sanitizing into it and, once strace has exited (the
last survivor is gone), records the execs the session did not (`trace-exec`, `late`).
"""

from __future__ import annotations

import fcntl
import os
import time

from mcpshim.base.fdio import write_all
from mcpshim.proc.ticks import start_of
from mcpshim.shim.rundirs import located
from mcpshim.trace.straceargs import strace_argv
from mcpshim.trace.tracedir import log_mark, nameless_file, new_locked_dir, sweep
from mcpshim.trace.tracer import is_gone, left_strace, orphaned_tracer, tracer_of

TYPE_CHECKING = False
if TYPE_CHECKING:  # (a traced `run` sets one up before its server starts: few modules here)
    from collections.abc import Callable, Sequence
    from pathlib import Path
    from typing import Any

    from mcpshim.paths import Locations
    from mcpshim.shim.rundirs import RunDirs
    from mcpshim.trace.filefacts import ReadRefused
    from mcpshim.trace.parse import Event, ExecFeed, LinePump, OutputParser
    from mcpshim.trace.records import ExecRefused, FileTracing, PortRefused, WriteOutside
    from mcpshim.trace.store import TraceParams

__all__ = ["TraceRun", "is_gone", "tracer_of"]

_PIPE_SIZE = 1 << 20  # strace stops its tracees while it waits on a full pipe
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


# ---- the run -----------------------------------------------------------------------------


class TraceRun:
    """One traced session: wraps the command, follows the tracer, writes the records."""

    def __init__(self, loc: Locations | RunDirs, strace: str) -> None:
        self.where = loc  # (a prelaunch's RunDirs: strings, until `loc` is asked for)
        self.strace = strace
        os.makedirs(loc.log_dir, exist_ok=True)
        base = os.path.join(loc.log_dir, "trace")
        try:
            os.mkdir(base, 0o700)
        except FileExistsError:
            pass
        sweep(base)  # what sessions killed outright left behind
        self.dir, self._lock = new_locked_dir(base)
        self.fifo = os.path.join(self.dir, "strace.pipe")
        self.tracer_pid = 0
        self.root_pid = 0
        self.root_start: int | None = None
        self._live: dict[int, int] = {}  # start ticks read from /proc while a process lived
        self._seen: set[int] = set()  # pids whose start was looked for
        self._log_mark = log_mark(loc)
        self._pump: LinePump | None = None  # made on the first read (`lines`)
        self._exec_hooks: list[Callable[[Event], None]] = []
        self._feed: ExecFeed | None = None
        self._rfd = self._hold = self._out = -1
        self._stored = 0  # bytes of whole lines in the output file
        self._parsed: OutputParser | None = None  # those lines' events (`_store`)
        self._write_outside: WriteOutside | None = None
        self.lost = ""  # why the output stopped being stored (a full disk), if it did
        self._cmdline = b""  # strace's own command line (wrap), the child's until it execs
        self._exec_refused: ExecRefused | None = None  # run --contain (see `contained`)
        self._port_refused: PortRefused | None = None
        self.files: FileTracing | None = None  # trace the file calls too (trace.filefacts)
        self._params: TraceParams | None = None  # set by finish, for the drain too
        try:
            self._open()
        except OSError:
            self._close_fds()
            _remove(self.dir)
            raise

    @property
    def loc(self) -> Locations:
        """The session's paths.Locations (made from a prelaunch's RunDirs once asked)."""
        return located(self.where)

    @property
    def _lines(self) -> LinePump:
        if self._pump is None:
            from mcpshim.trace.parse import LinePump

            self._pump = LinePump()
        return self._pump

    @property
    def _execs(self) -> ExecFeed:
        if self._feed is None:
            from mcpshim.trace.parse import ExecFeed

            self._feed = ExecFeed()
        return self._feed

    @property
    def _parser(self) -> OutputParser:
        if self._parsed is None:
            from mcpshim.trace.parse import OutputParser

            self._parsed = OutputParser(_redact_early)
        return self._parsed

    @property
    def output(self) -> Path:
        """The sanitized lines so far, through the descriptor of the file that has no name."""
        from pathlib import Path

        return Path(f"/proc/self/fd/{self._out}")

    def _open(self) -> None:
        """The FIFO strace writes into (`fd`) and the nameless file its sanitized lines go to;
        the directory stays locked while this session may use it (`sweep`)."""
        os.mkfifo(self.fifo, 0o600)
        self._rfd = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        # Held until strace is gone: no end of file before strace opens the FIFO.
        self._hold = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.fcntl(self._rfd, _F_SETPIPE_SZ, _PIPE_SIZE)
        except OSError:
            pass
        self._out = nameless_file(self.dir)

    def _close_fds(self, output: bool = True) -> None:
        """The FIFO's ends; with `output`, the nameless file and the lock too (the end)."""
        for fd in (self._rfd, self._hold, *((self._out, self._lock) if output else ())):
            if fd >= 0:
                os.close(fd)
        self._rfd = self._hold = -1
        if output:
            self._out = self._lock = -1

    def params(self, session: str, boot_id: str, root_cwd: bytes) -> TraceParams:
        """What turning this session's trace into records takes (the drain's, the
        watcher's when `run` is killed)."""
        from mcpshim.trace.store import TraceParams

        shim_dirs = (
            os.fsencode(self.where.shim_dir),
            os.fsencode(os.path.realpath(self.where.shim_dir)),
        )
        return TraceParams(
            session, boot_id, self.root_pid, root_cwd, self.root_start, os.getpid(),
            self.tracer_pid, shim_dirs,
        )  # fmt: skip

    def handover(self) -> tuple[int, int]:
        """The FIFO's read end and the nameless output, for the watcher to keep: should
        `run` be killed it drains the one into the other, and records the trace."""
        return self._rfd, self._out

    def discard(self) -> None:
        """The command never started: nothing was traced; the FIFO, the file and the
        directory go now."""
        self._close_fds()
        _remove(self.dir)

    def contained(
        self,
        exec_refused: ExecRefused,
        port_refused: PortRefused | None,
        write_outside: WriteOutside | None = None,
        read_refused: ReadRefused | None = None,
    ) -> None:
        """The session runs under a ruleset (`run --contain`): the exec attempts it refused
        say so, and with `port_refused` so do the connects it refused (their `trace-net`
        record, outcome denied, says why: `blocked`). With write rules (`write_outside`)
        the metadata calls Landlock does not refuse are traced too, and each change
        outside the write directories is recorded (`trace-file`: trace.metaparse). Where
        reads of credential files are held (`read_refused`), a refused open says why."""
        self._exec_refused, self._port_refused = exec_refused, port_refused
        self._write_outside = write_outside
        if self.files is not None:
            self.files.read_refused = read_refused

    def wrap(self, command: Sequence[str]) -> list[str]:
        """strace's command line for COMMAND, its output into the FIFO read here (`fd`)."""
        files = self.files is not None
        meta = self._write_outside is not None or files  # (metaparse loads only then)
        extra: Sequence[str] = ()
        if meta:
            from mcpshim.trace.metaparse import META_SYSCALLS

            extra = META_SYSCALLS
        argv = strace_argv(self.strace, self.fifo, command, extra=extra, files=files)
        self._cmdline = b"".join(os.fsencode(a) + b"\0" for a in argv)
        return argv

    def waiting(self) -> int:
        """Bytes strace has written into the FIFO that were not read yet."""
        import array
        import termios

        buf = array.array("i", [0])
        try:
            fcntl.ioctl(self._rfd, termios.FIONREAD, buf)
        except OSError:
            return 0
        return buf[0]

    @property
    def fd(self) -> int:
        """The FIFO's read end: the supervisor's loop calls `pump` when it is readable."""
        return self._rfd

    def started(self) -> None:
        """strace holds the FIFO (it opened it before it forked the tracer): no one else may."""
        try:
            os.unlink(self.fifo)
        except OSError:
            pass

    def pump(self, _fd: int = -1, budget: int = 1 << 24) -> bool:
        """Move what strace wrote from the FIFO to the file, sanitized; True at end of file.

        The exact start of every process new in the trace and still alive is read from
        /proc here (a start derived from a fork's time can be one tick off)."""
        if self._rfd < 0:
            return True
        eof = False
        while budget > 0:
            try:
                data = os.read(self._rfd, _PIPE_SIZE)
            except BlockingIOError:
                break
            if not data:
                eof = True
                break
            budget -= len(data)
            out = self._lines.feed(data)
            if out:
                self._store(out)
                self._note_pids(out)
                if self.files is not None:
                    self.files.inodes.feed(out)  # what was written and run, while it is there
                if self._exec_hooks and b"exec" in out:
                    for ev in self._execs.feed(out):
                        for hook in self._exec_hooks:
                            hook(ev)
        return eof

    def on_exec(self, hook: Callable[[Event], None]) -> None:
        """Call `hook(event)` for each exec that succeeded, as soon as its line is read
        (within TRACE_BATCH_S of strace writing it), while the session runs."""
        self._exec_hooks.append(hook)

    def _store(self, lines: bytes) -> None:
        """Append whole lines; a write that fails (a full disk) stops the storing, never the
        draining (a FIFO left full would stop every tracee): the trace is then `lost` from
        there on, and the file keeps only whole lines."""
        if self.lost:
            return
        try:
            write_all(self._out, lines)
            self._stored += len(lines)
            self._parser.feed(lines)
        except OSError as exc:
            self.lost = exc.strerror or str(exc)
            try:
                os.ftruncate(self._out, self._stored)
            except OSError:
                pass

    def tick(self) -> None:
        self.pump()

    def _note_pids(self, lines: bytes) -> None:
        """Each pid once: a process gone by then keeps the start derived from its fork."""
        for pid in _pids_in(lines) - self._seen:
            self._seen.add(pid)
            st = start_of(pid)
            if st is not None:
                self._live[pid] = st

    def attached(self, child_pid: int, timeout: float = 10.0) -> int:
        """The tracer's pid, once strace's start-up is over (0: no tracer was found).

        With -D the child forks a middle process that forks the tracer; the tracer
        attaches to the child (TracerPid is set), then kills the middle one, which the
        child reaps before it execs the command. The middle process is strace's, made
        before the trace began: no record explains it, so a sampler that saw it would
        report a gap. Returning only once the child has exec'd (its command line is no
        longer strace's) means every process the session can see from now on is traced.

        A command that is over before we first look (a busy machine) shows no TracerPid
        any more: the tracer is then the supervisor's child that strace left behind
        (`tracer.orphaned_tracer`); unknown, it would be reaped as a member no record explains."""
        if self.root_pid == child_pid:
            return self.tracer_pid  # looked for as the command started (supervise.launch)
        self.root_pid = child_pid
        self.root_start = start_of(child_pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            left = left_strace(child_pid, self._cmdline)  # first: then TracerPid is set
            pid = tracer_of(child_pid)
            if pid:
                self.tracer_pid = pid
            if pid is None or left:
                break  # the child left strace (exec'd or ended): the tracer attached
            time.sleep(0.001)
        if not self.tracer_pid:
            self.tracer_pid = orphaned_tracer(child_pid, self.strace)
        return self.tracer_pid

    def _tracer_gone(self, timeout: float) -> bool:
        """Wait for the tracer to exit, draining the FIFO meanwhile (a full FIFO stops it)."""
        deadline = time.monotonic() + timeout
        while True:
            self.pump()
            try:
                pid, _ = os.waitpid(self.tracer_pid, os.WNOHANG)
                gone = pid != 0
            except ChildProcessError:
                gone = True
            if not gone and os.path.exists(f"/proc/{self.tracer_pid}"):
                gone = is_gone(self.tracer_pid)
            if gone or time.monotonic() >= deadline:
                return gone
            time.sleep(0.005)

    def _close(self, complete: bool) -> None:
        """Stop reading: the last bytes when strace is gone, else hand the FIFO to a drain
        process that outlives the session (survivors' execs, sanitized, into the file)."""
        if self._hold >= 0:
            os.close(self._hold)
            self._hold = -1
        if self._rfd >= 0:
            if complete:
                for _ in range(64):
                    if self.pump():
                        break
                self._store(self._lines.flush())
            else:
                self.pump()
                self._hand_to_drain()
        self._close_fds(output=False)  # the output is read once more (finish)
        self.started()  # when strace never started, the FIFO goes now

    def _hand_to_drain(self) -> None:
        """A drain process reads on (trace.drain) and, once strace is gone, records what
        the session did not: the execs after the last one recorded here (`self.late`)."""
        from mcpshim.trace.drain import start_drain

        params = self._params.encode() if self._params else ""
        start_drain(self.loc, params, self._lines.take_carry(), self._rfd, self._out)

    def finish(self, session: str, boot_id: str, root_cwd: bytes) -> dict[str, Any]:
        """Wait for the tracer (not for survivors it still holds), parse, write the records."""
        from mcpshim.log import eventlog
        from mcpshim.trace.store import summary_payload, write_trace

        self.pump()
        complete = self.tracer_pid == 0 or self._tracer_gone(0.3)
        if not complete:
            # Tracees still alive (survivors): wait longer only if none of them are.
            files = self._parser.events()
            alive = [t for t in files if os.path.exists(f"/proc/{t}") and not is_gone(t)]
            complete = self._tracer_gone(0.1 if alive else 5.0)
        self._params = self.params(session, boot_id, root_cwd)
        self._close(complete)
        counts: dict[str, int] = {}
        try:
            # complete: the events parsed as stored; else the file (the drain writes on)
            trace, gaps = write_trace(
                self.loc, self.output, self._params, complete, self._live, self._log_mark,
                refused=(self._exec_refused, self._port_refused),
                parsed=self._parser.events() if complete and not self.lost else None,
                write_outside=self._write_outside, files=self.files, counts=counts,
            )  # fmt: skip
            # (the shim library's helper, which reads a parent's argv, is mcpshim's own)
            nfiles = None if self.files is None else counts.get("trace-file", 0)
            summary = summary_payload(self._params, self.strace, trace, gaps, complete, nfiles)
            if self.lost:
                summary["lost"] = self.lost  # the execs after it are not on record
            if not complete:
                summary["note"] = (
                    "the tracer stays attached to surviving processes (detaching would make their "
                    "fork/exec fail); their later execs are recorded (late) once the last of "
                    "them is gone"
                )
            eventlog.append_event(self.loc, "trace-summary", summary)
        finally:
            self._close_fds()  # the output goes with the last descriptor (the drain's)
            _remove(self.dir)
        return summary


def _pids_in(lines: bytes) -> set[int]:
    """The pid each line starts with (-f prints it first)."""
    import re  # (loaded once the trace is read, not before the server starts)

    return {int(p) for p in re.findall(rb"^(\d+) ", lines, re.M)}


def _remove(directory: str) -> None:
    import shutil

    shutil.rmtree(directory, ignore_errors=True)


def _redact_early(ev: Event) -> None:
    """Each exec's arguments redacted as the exec is parsed: what a rule needs compiled
    for them (tens of ms each) is compiled, and the result kept (log.redact remembers it
    for trace.records), while the session runs, not after its command ended, when the
    client waits for run's exit."""
    from mcpshim.log.redact import redact_argv

    redact_argv(list(ev.argv or ()))
