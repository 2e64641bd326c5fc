"""The sealer's state between runs: the next epoch's key, the chain's head, and how far each
segment is sealed. One file per log, under the user state directory, never beside the
verifier.

The file holds u_{E,S} and k_{E+1} (see keys), and nothing older: a sealer about to sign
as session s of epoch e writes u_{e,s+1} and k_{e+1} here first (fsync'ed), then signs with
u_{e,s}, which lives in its memory only. Anyone who can read this file (the same user can)
can make seals dated from then on: after the last real seal, never one dated before it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mcpshim.base.fdio import open_regular
from mcpshim.base.flock import open_lock, take
from mcpshim.base.safewrite import make_private_dir, write_file
from mcpshim.errors import InputError
from mcpshim.paths import default_state_dir

__all__ = [
    "AnchorConfig",
    "SealerLock",
    "State",
    "Tracked",
    "default_state_path",
    "load",
    "save",
    "unsealed_check",
]

SCHEMA = "mcpshim.seal-state/1"


@dataclass(frozen=True)
class Tracked:
    """A segment the sealer knows: its number in the chain, its file, and its sealed end."""

    no: int
    dev: int
    ino: int
    end: int
    at: int = -1  # where the sealer's last seal in this file is (its own, not to adopt)
    mine_end: int = -1  # where that seal record ends

    def grew(self, size: int) -> bool:
        """Bytes to seal? The sealer's own last seal alone needs none: the next seal names
        its head, so the chain covers it."""
        return size > self.end and not (self.at == self.end and size == self.mine_end)


@dataclass(frozen=True)
class AnchorConfig:
    """Where chain heads go: the system log (through logger), a command, or nowhere."""

    mode: str = "syslog"  # syslog | cmd | none
    socket: str = "/dev/log"
    cmd: str = ""
    interval: float = 10.0  # seconds between anchors while `run` seals; the last always goes


@dataclass(frozen=True)
class State:
    log_dir: str
    key: str  # the key's id (keys.Verifier.key_id)
    origin: int  # when epoch 0 began (UTC seconds)
    period: int  # seconds per epoch
    epoch: int  # E: the epoch of the next session's key
    session: int  # S: the next session in epoch E
    session_key: str  # u_{E,S}, hex
    epoch_key: str  # k_{E+1}, hex
    n: int = -1  # the last seal's place in the chain (-1: none yet)
    head: str = ""  # the last seal's head
    last_segment: int = 0
    segments: tuple[Tracked, ...] = ()
    anchor: AnchorConfig = field(default_factory=AnchorConfig)
    anchored: int = -1  # the last seal anchored
    anchored_at: float = 0.0
    warned: tuple[str, ...] = ()  # things said once already (no system log here...)
    boots: tuple[tuple[str, str], ...] = ()  # each boot anchor as last sealed (record.Seal)

    def to_json(self) -> bytes:
        doc = {"schema": SCHEMA, **asdict(self)}
        return json.dumps(doc, indent=1, sort_keys=True).encode() + b"\n"

    @classmethod
    def from_json(cls, doc: Any) -> State:
        if not isinstance(doc, dict) or doc.pop("schema", None) != SCHEMA:
            raise ValueError(f"not a {SCHEMA} document")
        doc["segments"] = tuple(Tracked(**t) for t in doc.get("segments", ()))
        doc["anchor"] = AnchorConfig(**doc.get("anchor", {}))
        doc["warned"] = tuple(doc.get("warned", ()))
        doc["boots"] = tuple((str(b), str(v)) for b, v in doc.get("boots", ()))
        state = cls(**doc)
        bytes.fromhex(state.epoch_key)
        bytes.fromhex(state.session_key)
        return state

    def warn_once(self, what: str) -> tuple[State, bool]:
        """(new state, True) the first time `what` is to be said."""
        if what in self.warned:
            return self, False
        return replace(self, warned=(*self.warned, what)), True


def default_state_path(log_dir: Path) -> Path:
    digest = hashlib.sha256(os.fsencode(os.path.abspath(log_dir))).hexdigest()[:16]
    return default_state_dir() / "seal" / f"{digest}.json"


def unsealed_check(log_dir: Path) -> Callable[[Path], bool] | None:
    """For retention: whether a segment holds bytes no seal covers yet (the sealer's state
    says how far each segment it knows is sealed); None when this log is not sealed."""
    state = load(default_state_path(log_dir))
    if state is None:
        return None
    known = {(t.dev, t.ino): t for t in state.segments}

    def unsealed(path: Path) -> bool:
        st = os.stat(path)
        t = known.get((st.st_dev, st.st_ino))
        return t is None or t.grew(st.st_size)  # its own last seal needs no other

    return unsealed


def load(path: Path) -> State | None:
    """The state, None when there is none; InputError when it is not one."""
    try:
        with open_regular(path) as fh:
            raw = fh.read(1 << 22)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the sealer state: {exc.strerror}") from None
    try:
        return State.from_json(json.loads(raw))
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a sealer state ({exc})") from None


def save(path: Path, state: State, durable: bool) -> None:
    """Replace the state file whole (0600). `durable`: fsync before and after the rename,
    for the writes that move the key on (a key that came back after a crash would let a
    sealer sign again in an epoch whose seals were already written)."""
    make_private_dir(path.parent)
    write_file(path, state.to_json(), 0o600, durable=durable)
    if durable:
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


class SealerLock:
    """One sealer per log at a time: flock(2) on `<state>.lock`, held for a whole session
    (a `run` holds it while it runs; cron's `log seal` waits a little, then leaves it be)."""

    def __init__(self, state_path: Path) -> None:
        self.path = state_path.with_name(state_path.name + ".lock")
        self.fd = -1

    def acquire(self, timeout: float = 0.0) -> bool:
        make_private_dir(self.path.parent)
        if self.fd < 0:
            self.fd = open_lock(self.path)
        return take(self.fd, timeout, 0.05)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the only fd drops the flock
            self.fd = -1
