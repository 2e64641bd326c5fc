"""The command must not outlive `mcpshim run`: a watcher ends the family when the supervisor
dies without finishing its session (SIGKILL, the OOM killer, a crash).

PR_SET_PDEATHSIG does not fit: it must be set between fork and exec, and the command is
started with posix_spawn, which runs nothing of ours there; it fires when the *thread*
that forked ends, not the process; a set-uid exec clears it; and it reaches the direct
child only, while the family the supervisor holds as a subreaper is re-parented to init
(or the next subreaper up) when it dies, out of anyone's reach.

So the supervisor forks a watcher before its command starts (no thread yet; a pipe of the
relay's it inherits is closed at once). The watcher keeps only stderr, the read end of a
pipe whose one writer is the supervisor and, traced, strace's FIFO and the session's
output (`trace_fds`), and sleeps in read(). The
supervisor writes the command's pid once it runs and `done` when its session is over
(the command ended and the family was accounted for: survivors left by `--on-exit report`
stay), then closes its end. End of file without `done` means the supervisor is gone: the
watcher ends the family as `--on-exit terminate` would (containment.contain: SIGTERM,
SIGKILL after the grace period, each process through a pidfd), the family being every
process in the command's process group and every process whose environment carries the
session id (MCPSHIM_SESSION, which the command's descendants inherit: those that left
the group with setsid or setpgid too, double forks included). A descendant that both
left the group and dropped the variable from its environment (`env -i`) is not found.
Then it writes the `session-end` the supervisor could not: no exit status (the command was
the supervisor's child, so its status went with it), the duration since the session began,
how many it ended, and `cause: supervisor-lost`. Last, mcpshim's own helpers the supervisor
named (`helper`: the relay's pump and recorder children) get the grace period to finish
what they hold (they end on their own once the relayed streams end), then SIGKILL: no
process `run` started outlives it (a recorder stuck on a hostile message kept a client's
stderr open for good).

The watcher is in a process group of its own, so a signal to the supervisor's group does
not take it too, and ignores SIGINT, SIGTERM and SIGHUP, as the relay's children do. What
only the watcher runs is imported in the watcher, after the fork: never on the way to the
server's start.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # (`run` forks the watcher before its server starts: few modules here)
    from typing import NoReturn

    from mcpshim.paths import Locations
    from mcpshim.proc.procinfo import Stat
    from mcpshim.shim.rundirs import RunDirs
    from mcpshim.trace.drain import Taker

__all__ = ["Watcher"]

_DONE = b"done\n"
_FIFO, _OUT = 4, 5  # where the watcher keeps a traced session's FIFO and output
_TRACE_WAIT_S = 5.0  # after the family: how long strace may take to say its last
_IGNORED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Watcher:
    """The supervisor's end: `start` forks the watcher, `command` names the command once
    it runs, `finish` stands it down (or, with done=False, lets it act at once)."""

    def __init__(self, session: str, grace: float, loc: Locations | RunDirs | None = None) -> None:
        self.session = session
        self.grace = grace
        self.loc = loc  # where the session-end goes when the watcher ends the family
        self.pid = 0
        self._w = -1
        self._ending = False  # told the session is over, not yet reaped
        #: a traced session's FIFO read end and nameless output (trace.run.handover): the
        #: watcher keeps them, so a `run` killed mid-session keeps its trace (trace.drain.Taker)
        self.trace_fds: tuple[int, int] | None = None

    def start(self) -> int:
        """Fork the watcher; its pid (0 when fork failed: the session runs unwatched)."""
        r, w = os.pipe()  # not inherited by the command (posix_spawn closes it at exec)
        started = time.monotonic()
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return 0
        if pid == 0:  # pragma: no cover - the child; it ends in os._exit
            try:
                os.close(w)
                _watch(r, self.session, self.grace, self.loc, started, self.trace_fds)
            finally:
                os._exit(70)
        os.close(r)
        self.pid, self._w = pid, w
        return pid

    def command(self, pid: int) -> None:
        self._send(f"{pid}\n".encode())

    def trace(self, params: str, strace: str, directory: str) -> None:
        """What recording the trace takes, once the command runs (trace.store.TraceParams
        encoded, strace's path, the session's trace directory)."""
        import json

        doc = {"params": params, "strace": strace, "dir": directory}
        self._send(b"t " + json.dumps(doc).encode() + b"\n")

    def helper(self, pid: int) -> None:
        """A child of mcpshim's own to end too, should the supervisor be lost."""
        from mcpshim.proc.procinfo import read_stat

        if pid != self.pid and (st := read_stat(pid)) is not None:
            self._send(f"h {pid} {st.start}\n".encode())

    def finish(self, done: bool, wait: bool = True) -> None:
        """Close our end (`done`: the session is over, the watcher leaves the family be),
        then reap the watcher when it ends at once (it does when done); `wait` False: it
        ends meanwhile, and `reap` collects it (run's exit waited for it otherwise)."""
        if self._w < 0:
            return
        if done:
            self._send(_DONE)
        try:
            os.close(self._w)
        except OSError:
            pass
        self._w = -1
        self._ending = done
        if wait:
            self.reap()

    def reap(self) -> None:
        """Collect a watcher told the session is over (finish)."""
        if self._ending and self.pid:
            self._ending = False
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass

    def _send(self, data: bytes) -> None:
        if self._w >= 0:
            try:
                os.write(self._w, data)  # a few bytes into an empty pipe: never blocks
            except OSError:
                pass


# ---- the watcher ---------------------------------------------------------------------------


def _watch(
    r: int,
    session: str,
    grace: float,
    where: Locations | RunDirs | None,
    started: float,
    trace_fds: tuple[int, int] | None,
) -> NoReturn:
    for sig in _IGNORED:
        signal.signal(sig, signal.SIG_IGN)
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:
        pass
    _keep_only(r, trace_fds)
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    try:
        if sys.platform.startswith("linux"):
            with open("/proc/self/comm", "w") as comm:
                comm.write("mcpshim-watch")
    except OSError:
        pass
    said = b""
    try:
        while chunk := os.read(3, 256):
            said += chunk
    except OSError:
        pass
    lines = said.split(b"\n")
    if _DONE.strip() in lines:
        os._exit(0)
    # Only now what ending the family takes: loaded while the server starts, it took CPU
    # the server's start-up needed.
    import contextlib

    from mcpshim.log import eventlog
    from mcpshim.shim.rundirs import located
    from mcpshim.supervise.containment import contain
    from mcpshim.supervise.session import end_payload
    from mcpshim.trace.drain import Taker

    pids = [int(x) for x in lines if x.isdigit()]
    pgid = pids[-1] if pids else 0  # the command leads a process group of its own
    me = os.getpid()
    taker = Taker(_FIFO, _OUT) if trace_fds is not None else None
    pump = taker.pump if taker is not None else (lambda: None)
    ended, emptied = contain(lambda: family(session, pgid, me), grace, pump, None)
    loc = located(where) if where is not None else None
    if loc is not None:
        payload = end_payload(
            session, None, time.monotonic() - started, len(ended), emptied, "supervisor-lost"
        )
        with contextlib.suppress(OSError):  # a log it cannot write, or its lock held
            eventlog.append_event(loc, "session-end", payload)
        traced = _traced(lines)
        if taker is not None and traced is not None:
            _record_trace(taker, loc, traced, grace)
    _end_helpers(_helpers(lines), grace)
    os._exit(0)


def _traced(lines: list[bytes]) -> dict[str, str] | None:
    """What the supervisor said about its trace (`Watcher.trace`), if it did."""
    import contextlib
    import json

    for line in lines:
        if line.startswith(b"t "):
            with contextlib.suppress(ValueError):
                doc = json.loads(line[2:])
                if isinstance(doc, dict):
                    return {k: str(v) for k, v in doc.items()}
    return None


def _record_trace(taker: Taker, loc: Locations, traced: dict[str, str], grace: float) -> None:
    """The trace up to the kill, into the log; then nothing of it is left on disk."""
    from mcpshim.trace.store import TraceParams

    try:
        params = TraceParams.decode(traced["params"])
        taker.finish(loc, params, traced.get("strace", ""), grace + _TRACE_WAIT_S)
    except (OSError, ValueError, KeyError) as exc:  # a lock timeout is an OSError
        print(f"mcpshim: warning: the trace of the killed session was not recorded: {exc}",
              file=sys.stderr)  # fmt: skip
    finally:
        if traced.get("dir"):
            import shutil

            shutil.rmtree(traced["dir"], ignore_errors=True)


def _helpers(lines: list[bytes]) -> dict[int, int]:
    """The helpers the supervisor named: pid -> start ticks."""
    out: dict[int, int] = {}
    for line in lines:
        words = line.split()
        if len(words) == 3 and words[0] == b"h" and words[1].isdigit() and words[2].isdigit():
            out[int(words[1])] = int(words[2])
    return out


def _end_helpers(helpers: dict[int, int], grace: float) -> None:
    """Wait up to `grace` for each helper to end, then SIGKILL what remains (by pid and
    start ticks: a pid reused since is someone else's)."""
    from mcpshim.proc.procinfo import read_stat

    def alive() -> list[int]:
        return [p for p, start in helpers.items() if (st := read_stat(p)) is not None
                and st.start == start and st.state not in ("Z", "X")]  # fmt: skip

    end = time.monotonic() + grace
    while alive() and time.monotonic() < end:
        time.sleep(0.05)
    for pid in alive():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _keep_only(r: int, trace_fds: tuple[int, int] | None) -> None:
    """stderr, the pipe (as fd 3) and a traced session's FIFO and output (4 and 5); 0 and
    1 become /dev/null (never the client's)."""
    keep = [r, *(trace_fds or ())]
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in keep]  # clear of 3 to 5
    for fd, to in zip(high, (3, _FIFO, _OUT), strict=False):
        os.dup2(fd, to)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.closerange(3 + len(keep), _max_fd())  # null, the originals and their copies


def _max_fd() -> int:
    try:
        return int(os.sysconf("SC_OPEN_MAX"))
    except (OSError, ValueError):
        return 1 << 16


def family(session: str, pgid: int, me: int) -> dict[int, Stat]:
    """The live processes of the session: in the command's process group (`pgid`, 0 for
    none) or carrying the session id in their environment; `me` and zombies left out."""
    from mcpshim.proc.procinfo import LINUX, read_stat
    from mcpshim.supervise.containment import group_members
    from mcpshim.supervise.session import SESSION_ENV

    if not LINUX:
        return group_members(pgid, me) if pgid > 0 else {}
    needle = f"{SESSION_ENV}={session}".encode()
    out: dict[int, Stat] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        st = read_stat(int(name))
        if st is None or st.state in ("Z", "X"):
            continue
        if (pgid > 0 and st.pgid == pgid) or _carries(st.pid, needle):
            out[st.pid] = st
    return out


def _carries(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return needle in fh.read().split(b"\0")
    except OSError:
        return False
