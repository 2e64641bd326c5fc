"""Newline-delimited messages out of the copies of relayed chunks, one Framer per direction,
and what was dropped on the way (copies a recorder that fell behind never took).

A line past MAX_MESSAGE is not kept (bounded memory): it is hashed as it goes by, so its
record can still say which message it was (Oversize).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_MESSAGE", "Dropped", "Framer", "Oversize", "dropped_reason"]

MAX_MESSAGE = 64 << 20  # a longer line is relayed but not parsed (bounded memory)


@dataclass(frozen=True)
class Oversize:
    """A line too long to keep: its length and the SHA-256 of its bytes (hashed as they
    went by), so the record can say which message it was without holding it."""

    size: int
    sha256: str


@dataclass
class Framer:
    """Newline-delimited messages out of arbitrary chunks; one per direction."""

    parts: list[bytes] = field(default_factory=list)
    size: int = 0
    oversized: Any = None  # the hash of a line too long to keep, as it goes by
    skipping: bool = False  # after a gap: the rest of a message whose start was dropped

    def feed(self, chunk: bytes) -> Iterator[bytes | Oversize]:
        """Complete lines (without the newline), or an Oversize for one too long to keep."""
        start = 0
        if self.skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                return
            start, self.skipping = nl + 1, False
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                rest = chunk[start:]
                if rest:
                    self._keep(rest)
                return
            piece = chunk[start:nl]
            self._keep(piece)
            if self.oversized is not None:
                yield Oversize(self.size, self.oversized.hexdigest())
            elif len(self.parts) > 1:
                yield b"".join(self.parts)
            else:
                yield piece
            self.parts, self.size, self.oversized = [], 0, None
            start = nl + 1

    def _keep(self, data: bytes) -> None:
        self.size += len(data)
        if self.oversized is not None:
            self.oversized.update(data)
            return
        self.parts.append(data)
        if self.size > MAX_MESSAGE:
            self.oversized = hashlib.sha256()
            for part in self.parts:
                self.oversized.update(part)
            self.parts = []

    def pending(self) -> int:
        return self.size

    def gap(self, dropped: Dropped) -> None:
        """Bytes of this direction were dropped here: what was pending is cut short, and
        unless the dropped bytes ended a message, so is the first line after them (a line
        skipped since an earlier gap ended inside them when they end with a newline)."""
        self.parts, self.size, self.oversized = [], 0, None
        self.skipping = not dropped.clean

    def rest(self) -> bytes | None:
        """What is left without a newline (None when it was too large to keep)."""
        return None if self.oversized is not None else b"".join(self.parts)

    def rest_sha256(self) -> str:
        """The SHA-256 of what is left without a newline."""
        if self.oversized is not None:
            return str(self.oversized.hexdigest())
        return hashlib.sha256(b"".join(self.parts)).hexdigest()


@dataclass
class Dropped:
    """Copies of one direction that never reached the recorder (it fell behind and what
    waited for it reached its limit): the bytes, and the messages they touched."""

    size: int = 0
    newlines: int = 0
    clean: bool = True  # the last byte dropped ended a message

    def add(self, data: bytes) -> None:
        if data:
            self.size += len(data)
            self.newlines += data.count(b"\n")
            self.clean = data.endswith(b"\n")

    def merge(self, other: Dropped) -> None:
        if other.size:
            self.size += other.size
            self.newlines += other.newlines
            self.clean = other.clean

    @property
    def messages(self) -> int:
        """Each newline ends a message not recorded; so does one cut short at the end."""
        return self.newlines + (0 if self.clean else 1)


def dropped_reason(limit: int) -> str:
    return (
        f"the recorder fell behind and the copies waiting for it reached {limit >> 20} MiB: "
        "these were not recorded (the bytes themselves were relayed unchanged)"
    )
