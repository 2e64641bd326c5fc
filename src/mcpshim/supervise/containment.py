"""What `mcpshim run` does with the family still alive when the command has ended.

A server that signals its helpers and exits at once (cclsp stopping its language server)
leaves them ending moments later: were they counted at the instant the server exited, the
count would be a race. So the family first gets a short, bounded settle (`settle`: at most
SETTLE_S, over as soon as nobody is left); a process that ends within it is an ended process,
reaped with its real time (or seen ending by the trace). Every descendant alive after it is
a survivor: its evidence is read first (before any signal can change it), then it is
reported or terminated (SIGTERM, SIGKILL after the grace period, and a check that it is
gone). Signals go through a pidfd where the OS has them, so a process
that exited and whose pid was reused is never hit in its place.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import time
from collections.abc import Callable, Mapping

import psutil

from mcpshim.proc.procinfo import ProcInfo, Stat, proc_info, read_stat, start_ticks

__all__ = ["SETTLE_S", "account_survivors", "contain", "group_members", "settle"]

_KILL_DEADLINE = 10.0  # seconds of SIGKILL rounds before a survivor is declared unkillable
SETTLE_S = 0.5  # how long the family may take to end after the command has
_SETTLE_POLL_S = 0.02  # a new process, the tracer's FIFO: looked at this often meanwhile


def settle(
    live_family: Callable[[], dict[int, Stat]], reap: Callable[[], None], seconds: float
) -> dict[int, Stat]:
    """Wait up to `seconds` for the family to end, waking as each member exits (a pidfd
    turns readable; `reap` collects and records what was ours to reap); who is left."""
    deadline = time.monotonic() + seconds
    pidfds: dict[int, int] = {}
    live = live_family()
    try:
        while live and (left := deadline - time.monotonic()) > 0:
            for pid, st in live.items():
                if pid not in pidfds and (fd := _pidfd(pid, st.start)) is not None:
                    pidfds[pid] = fd
            _wait_any(pidfds, min(left, _SETTLE_POLL_S))
            reap()
            live = live_family()
            for pid in [p for p in pidfds if p not in live]:
                os.close(pidfds.pop(pid))
    finally:
        for fd in pidfds.values():
            os.close(fd)
    return live


def _pidfd(pid: int, start: int | None) -> int | None:
    """A pidfd of the process itself (None where the OS has none, or it is gone)."""
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    if start_ticks(pid) != start:
        os.close(fd)
        return None
    return fd


def account_survivors(
    live_family: Callable[[], dict[int, Stat]],
    terminate: bool,
    grace: float,
    reap: Callable[[], None],
    group: int | None,
) -> tuple[list[tuple[ProcInfo, str]], bool]:
    """Every survivor with its evidence and its fate ('reported', 'terminated', 'killed'),
    and whether the family is verifiably empty after termination.

    `group` is the command's process group, signalled as a whole when there is no
    subreaper (None when there is)."""
    survivors: dict[int, tuple[Stat, ProcInfo | None]] = {}

    def collect() -> dict[int, Stat]:
        live = live_family()
        for pid, st in live.items():
            if pid not in survivors:
                survivors[pid] = (st, proc_info(pid))
        return live

    live = collect()
    actions = {pid: "reported" for pid in survivors}
    terminated = False
    if terminate and live:
        actions, terminated = contain(collect, grace, reap, group)
    out: list[tuple[ProcInfo, str]] = []
    for pid, (st, seen) in survivors.items():
        info = seen
        if info is None or info.start != st.start:
            info = ProcInfo(pid, st.ppid, st.start, None, b"", (), b"", None, ())
        out.append((info, actions.get(pid, "terminated")))
    return out, terminated


def contain(
    collect: Callable[[], dict[int, Stat]],
    grace: float,
    reap: Callable[[], None],
    group: int | None,
) -> tuple[dict[int, str], bool]:
    """SIGTERM, SIGKILL after the grace period, until the family is verifiably empty."""
    termed: set[int] = set()
    killed: set[int] = set()
    pidfds: dict[int, int] = {}
    deadline = time.monotonic() + grace
    sig = signal.SIGTERM
    try:
        live = collect()
        while live:
            for pid, st in live.items():
                if sig == signal.SIGKILL:
                    killed.add(pid)
                elif pid in termed:
                    continue
                termed.add(pid)
                _signal(pid, st.start, sig, pidfds)
            if group is not None:
                with contextlib.suppress(OSError):
                    os.killpg(group, sig)
            _wait_any(pidfds, 0.05)
            reap()
            live = collect()
            for pid in [p for p in pidfds if p not in live]:
                os.close(pidfds.pop(pid))  # exited: its pidfd would stay readable
            now = time.monotonic()
            if sig == signal.SIGTERM and now >= deadline:
                sig = signal.SIGKILL
            elif now >= deadline + _KILL_DEADLINE:
                break
    finally:
        for fd in pidfds.values():
            os.close(fd)
    actions = {pid: "killed" if pid in killed else "terminated" for pid in termed}
    return actions, not live


def _signal(pid: int, start: int | None, sig: int, pidfds: dict[int, int]) -> None:
    """Signal the process itself, never a reuser of its pid (a pidfd pins the process)."""
    if pid not in pidfds and hasattr(os, "pidfd_open"):
        if (fd := _pidfd(pid, start)) is None:
            return
        pidfds[pid] = fd
    try:
        if pid in pidfds:
            signal.pidfd_send_signal(pidfds[pid], sig)
        elif start_ticks(pid) == start:
            os.kill(pid, sig)
    except OSError:
        return


def _wait_any(pidfds: Mapping[int, int], timeout: float) -> None:
    """Sleep until a signalled process exits (its pidfd turns readable) or timeout."""
    sel = selectors.DefaultSelector()
    try:
        for fd in pidfds.values():
            sel.register(fd, selectors.EVENT_READ)
        if pidfds:
            sel.select(timeout)
        else:
            time.sleep(timeout)
    finally:
        sel.close()


def group_members(pgid: int, exclude: int) -> dict[int, Stat]:
    """Processes still in the command's process group (the fallback without a subreaper)."""
    out: dict[int, Stat] = {}
    for p in psutil.process_iter():
        try:
            if p.pid != exclude and os.getpgid(p.pid) == pgid:
                st = read_stat(p.pid)
                if st is not None:
                    out[p.pid] = st
        except (OSError, psutil.Error):
            continue
    return out
