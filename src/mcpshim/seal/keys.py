"""Seal keys: a root the user keeps, one key per epoch of wall-clock time derived forward
from it, and within an epoch one key per sealing session, each erased once used.

    k_0 = H("epoch-0" | root)                k_{e+1} = H("next" | k_e)
    u_{e,0} = H("session" | k_e)             u_{e,s+1} = H("next-session" | u_{e,s})
    epoch(t) = floor((t - origin) / period)

Session s of epoch e signs its seals (dated in epoch e) with u_{e,s}. Hashes only derive
forward: whoever holds k_e or u_{e,s} can make seals dated in epoch e (by session s or
later) or after, and none dated earlier. The verifier is the root with its origin and
period (without them, seals could claim another origin). The sealer's state file holds
u_{e,s+1} and k_{e+1}, the keys of the sessions after the one running; the running
session's key lives only in the sealer's memory, which `make_undumpable` keeps from other
processes of the same user.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import hmac
import os
import sys
import time
from dataclasses import dataclass

from mcpshim.errors import InputError

__all__ = [
    "VERIFIER_PREFIX",
    "KeyWalker",
    "SealKeys",
    "Verifier",
    "first_key",
    "mac",
    "make_undumpable",
    "next_key",
]

VERIFIER_PREFIX = "mcpshim-verifier-1:"
_PR_SET_DUMPABLE = 4
#: how far ahead of now a seal may be dated before it counts as dated in the future
FUTURE_SLACK_S = 300
#: sealing sessions in one epoch beyond which a seal is not believed (a forged index
#: must not make verify hash for hours)
MAX_SESSIONS = 1_000_000


def _h(label: bytes, key: bytes | bytearray) -> bytes:
    return hashlib.sha256(b"mcpshim-seal/" + label + b"\0" + key).digest()


def first_key(root: bytes | bytearray) -> bytes:
    return _h(b"epoch-0", root)


def next_key(key: bytes | bytearray) -> bytes:
    return _h(b"next", key)


def session_key(epoch_key: bytes | bytearray) -> bytes:
    return _h(b"session", epoch_key)


def next_session(key: bytes | bytearray) -> bytes:
    return _h(b"next-session", key)


def mac(key: bytes | bytearray, message: bytes) -> str:
    return hmac.digest(key, message, "sha256").hex()


@dataclass(frozen=True)
class Verifier:
    """The root key, the time epoch 0 began (UTC seconds) and the epoch's length."""

    root: bytes
    origin: int
    period: int

    @classmethod
    def new(cls, period: int, now: float | None = None) -> Verifier:
        return cls(os.urandom(32), int(time.time() if now is None else now), period)

    @property
    def key_id(self) -> str:
        """Names the key in every seal without revealing it."""
        tag = f"{self.origin}:{self.period}".encode()
        return _h(b"id", self.root + tag).hex()[:16]

    def epoch(self, t: float) -> int:
        return int((t - self.origin) // self.period)

    def text(self) -> str:
        return f"{VERIFIER_PREFIX}{self.root.hex()}:{self.origin}:{self.period}"

    @classmethod
    def parse(cls, text: str) -> Verifier:
        body = text.strip().removeprefix(VERIFIER_PREFIX)
        parts = body.split(":")
        if body == text.strip() or len(parts) != 3 or len(parts[0]) != 64:
            raise InputError(f"not a verifier (expected {VERIFIER_PREFIX}KEY:ORIGIN:PERIOD)")
        try:
            v = cls(bytes.fromhex(parts[0]), int(parts[1]), int(parts[2]))
        except ValueError:
            raise InputError("not a verifier (bad key, origin or period)") from None
        if v.period < 1:
            raise InputError("not a verifier (its period is not positive)")
        return v


class SealKeys:
    """A sealing session's keys: u_{e,s}, which signs, and k_{e+1}, to move on to a later
    epoch. Moving on overwrites them in place (bytearrays: our objects keep no copy of a
    key once used)."""

    def __init__(self, epoch: int, session: int, key: bytearray, following: bytearray) -> None:
        self.epoch, self.session = epoch, session
        self._key, self._following = key, following

    def move_to(self, epoch: int) -> None:
        """Session 0 of a later epoch."""
        if epoch <= self.epoch:
            return
        k = bytearray(self._following)  # k_{self.epoch+1}
        for _ in range(epoch - self.epoch - 1):
            k[:] = next_key(k)
        self._key[:] = session_key(k)
        self._following[:] = next_key(k)
        k[:] = bytes(len(k))
        self.epoch, self.session = epoch, 0

    def for_state(self) -> tuple[int, int, str, str]:
        """(epoch, session, u_{e,s+1}, k_{e+1}): what the state file keeps meanwhile."""
        return self.epoch, self.session + 1, next_session(self._key).hex(), self._following.hex()

    def sign(self, message: bytes) -> str:
        return mac(self._key, message)

    def erase(self) -> None:
        self._key[:] = bytes(len(self._key))
        self._following[:] = bytes(len(self._following))


class KeyWalker:
    """k_e from the verifier for `log verify`, walking forward from the last key asked for
    (seals come in order, so the walk is about one hash per epoch the log spans)."""

    def __init__(self, verifier: Verifier, now: float | None = None) -> None:
        self.v = verifier
        self.id = verifier.key_id
        self.limit = verifier.epoch((time.time() if now is None else now) + FUTURE_SLACK_S)
        self._at: tuple[int, bytes] = (0, first_key(verifier.root))

    def key(self, epoch: int, session: int) -> bytes | None:
        """u_{epoch,session}; None for an epoch that has not begun (a seal dated in the
        future is forged) or a session count no sealer reaches."""
        k = self.epoch_key(epoch)
        if k is None or session > MAX_SESSIONS:
            return None
        u = session_key(k)
        for _ in range(session):
            u = next_session(u)
        return u

    def epoch_key(self, epoch: int) -> bytes | None:
        if epoch < 0 or epoch > self.limit:
            return None
        e, k = self._at if self._at[0] <= epoch else (0, first_key(self.v.root))
        while e < epoch:
            k, e = next_key(k), e + 1
        self._at = (epoch, k)
        return k


def make_undumpable() -> bool:
    """PR_SET_DUMPABLE 0: no core dump, and other processes of the same user can neither
    ptrace this one nor open its /proc/PID/mem (root, or CAP_SYS_PTRACE, still can).
    False where the call is not available (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
