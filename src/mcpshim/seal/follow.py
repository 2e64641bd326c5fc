"""Who seals: `log seal` once (cron, a systemd timer), `log seal --init`, and the sealer
`mcpshim run` starts beside its supervisor (`log seal --follow`).

Every sealing process first makes itself non-dumpable, before it reads a key. The follower
seals at most `interval` seconds after a record lands, and once more when it is told to
stop: `run` closes the pipe on its stdin (EOF also comes when `run` is killed, and cannot
arrive before the follower is ready to hear it, unlike a signal); by hand, SIGTERM, SIGINT
or SIGHUP. Several `run`s on one log start one follower each; one holds the sealer lock
and seals, the others wait for it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NoReturn

from mcpshim.errors import UsageError
from mcpshim.paths import Locations
from mcpshim.seal import keys
from mcpshim.seal.record import head_of
from mcpshim.seal.sealer import (
    Say,
    Sealer,
    SegmentFile,
    Written,
    last_seal,
    log_id,
    segment_files,
)
from mcpshim.seal.state import AnchorConfig, State, Tracked, default_state_path, load, save

__all__ = ["FollowerProcess", "init", "seal_once", "start_follower"]

_STOP = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
FOLLOW_INTERVAL_S = 1.0
HANDOVER_S = 10.0


def init(
    loc: Locations, state_path: Path, anchor: AnchorConfig, force: bool, say: Say, period: int
) -> tuple[str, list[Written]]:
    """A new key; the first seal (the genesis, or the first under the new key) is written
    at once. Returns the verifier, which exists nowhere else afterwards."""
    keys.make_undumpable()
    sealer = Sealer(loc, state_path, say)
    if not sealer.lock.acquire(5.0):
        raise_busy(loc)
    try:
        verifier, state = init_state(loc, state_path, anchor, force, period)
        sealer.start(0.0, state)  # the lock is ours already: flock again on our fd holds
        written = sealer.seal()
        sealer.anchor(final=True)
        return verifier.text(), written
    finally:
        sealer.close()


def init_state(
    loc: Locations, state_path: Path, anchor: AnchorConfig, force: bool, period: int
) -> tuple[keys.Verifier, State]:
    """A new key and the state that continues the chain already in the log (if any).

    The state starts at session 0 of epoch 0 and goes to `Sealer.start`, which writes the
    keys of the sessions after it first: neither the root nor a key that signs ever touches
    the disk beside the log."""
    old = load(state_path)
    if old is not None and not force:
        raise UsageError(
            f"{loc.log_dir} is sealed already (state {state_path}); --force starts a new key "
            "(the old verifier then only covers the seals made before)"
        )
    n, head, tracked, last_segment = -1, "", [], 0
    for f in segment_files(loc):
        last = last_seal(f)
        if last is None:
            continue
        seal, at, end = last
        tracked.append(Tracked(seal.segment, f.dev, f.ino, seal.end, at, end))
        last_segment = max(last_segment, seal.segment)
        if seal.n > n:  # a rotated segment's last seal may come after the next one's first
            n, head = seal.n, seal_head(f, at, end)
    v = keys.Verifier.new(period)
    state = State(
        log_dir=log_id(loc),
        key=v.key_id,
        origin=v.origin,
        period=v.period,
        epoch=0,
        session=0,
        session_key=keys.session_key(keys.first_key(v.root)).hex(),
        epoch_key=keys.next_key(keys.first_key(v.root)).hex(),
        n=n,
        head=head,
        last_segment=last_segment,
        segments=tuple(tracked),
        anchor=anchor,
    )
    return v, state


def seal_head(f: SegmentFile, at: int, end: int) -> str:
    with open(f.path, "rb") as fh:
        fh.seek(at)
        return head_of(fh.read(end - at))


def raise_busy(loc: Locations) -> NoReturn:
    raise UsageError(f"another sealer is sealing {loc.log_dir} (a `mcpshim run`?); try again")


def seal_once(
    loc: Locations, state_path: Path, say: Say, timeout: float = 5.0
) -> list[Written] | None:
    """Seal what is pending; None when another sealer holds the lock (it seals for us)."""
    keys.make_undumpable()
    sealer = Sealer(loc, state_path, say)
    if not sealer.start(timeout):
        return None
    try:
        written = sealer.seal()
        sealer.anchor(final=True)
        return written
    finally:
        sealer.close()


def update_anchor(state_path: Path, anchor: AnchorConfig) -> None:
    state = load(state_path)
    if state is not None:
        save(state_path, replace(state, anchor=anchor, warned=()), durable=False)


class _Stop:
    """When to stop: a signal, the parent gone, or (`eof`) EOF on stdin."""

    def __init__(self, eof: bool) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP)
        self.parent = os.getppid()
        self.eof = eof
        self.done = False

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout`; True when it is time to stop."""
        if self.eof:
            ready, _, _ = select.select([0], [], [], timeout)
            if ready and not os.read(0, 512):
                self.done = True
        elif signal.sigtimedwait(_STOP, timeout) is not None:
            self.done = True
        if signal.sigpending() & _STOP:
            signal.sigtimedwait(_STOP, 0)
            self.done = True
        return self.done or os.getppid() != self.parent


def follow(
    loc: Locations, state_path: Path, say: Say, eof: bool, interval: float = FOLLOW_INTERVAL_S
) -> int:
    """Seal continuously until told to stop (see the module docstring), then once more."""
    keys.make_undumpable()
    stop_ = _Stop(eof)
    sealer = Sealer(loc, state_path, say)
    while not sealer.start(0.0):
        if stop_.wait(interval) and not _handed_over(sealer, loc, state_path):
            return 0  # the holder has sealed what we would have
    try:
        while True:
            stop = stop_.wait(interval)
            if stop or sealer.pending():
                sealer.seal()
            sealer.anchor(final=stop)
            if stop:
                return 0
    finally:
        sealer.close()


def _handed_over(sealer: Sealer, loc: Locations, state_path: Path) -> bool:
    """Stopping while another sealer holds the lock: our session's last records are in the
    live log. Wait until the holder has sealed them (its state says so), or until it leaves
    and the lock is ours (True: we seal them)."""
    try:
        st = os.stat(loc.log_file)
    except FileNotFoundError:
        return False
    deadline = time.monotonic() + HANDOVER_S
    while time.monotonic() < deadline:
        if sealer.start(0.0):
            return True
        held = load(state_path)
        for t in held.segments if held is not None else ():
            if (t.dev, t.ino) == (st.st_dev, st.st_ino) and t.end >= st.st_size:
                return False
        time.sleep(0.1)
    return False


@dataclass
class FollowerProcess:
    """The follower `run` starts: its own session (no terminal signals), a pipe for stdin
    (closing it says stop), stdout nowhere (it may be an MCP client's pipe), stderr shared
    for the once-only warnings."""

    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout: float = 30.0) -> int | None:
        """Close its stdin, then wait for the last seal."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.proc.wait(timeout)
        self.proc.kill()
        return self.proc.wait()


def start_follower(loc: Locations) -> FollowerProcess | None:
    """Start the follower when this log is sealed (has a sealer state); None otherwise."""
    if load(default_state_path(loc.log_dir)) is None:
        return None
    argv = [sys.executable, "-m", "mcpshim", "log", "--dir", os.fsdecode(loc.shim_dir)]
    argv += ["--log-dir", os.fsdecode(loc.log_dir), "seal", "--follow", "--stop-on-eof"]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    return FollowerProcess(proc)


@contextlib.contextmanager
def following(loc: Locations) -> Iterator[FollowerProcess | None]:
    follower = start_follower(loc)
    try:
        yield follower
    finally:
        if follower is not None:
            follower.stop()
