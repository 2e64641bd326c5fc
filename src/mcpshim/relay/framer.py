"""Newline-delimited messages out of the copies of relayed chunks, one Framer per direction,
and what was dropped on the way (copies a recorder that fell behind never took).

A line past MAX_MESSAGE is not kept (bounded memory): it is hashed as it goes by, so its
record can still say which message it was (Oversize).

Messages are cut where their reader cuts them. The client's go to the server, and the
Python SDK's stdio server reads its stdin with universal newlines: `\n`, `\r\n` and a bare
`\r` each end a line (a server on the TypeScript SDK ends lines at `\n` only). So the
client's direction is framed `universal`: each message recorded is one the Python server
reads, and a line that a bare `\r` splits into more than one message (servers would read it
differently) is said once more as a whole (Split). The server's messages go to the client,
and the SDKs' clients end lines at `\n` only (the TypeScript one drops a `\r` before it).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_MESSAGE",
    "Dropped",
    "Framer",
    "Oversize",
    "Split",
    "dropped_reason",
    "is_blank",
    "universal_lines",
]

MAX_MESSAGE = 64 << 20  # a longer line is relayed but not parsed (bounded memory)
_END = re.compile(rb"\r\n|\r|\n")  # a line end to a reader with universal newlines
_BLANK = b" \t"


def universal_lines(line: bytes) -> list[bytes]:
    """The lines a reader with universal newlines reads in `line` (ends dropped)."""
    return _END.split(line)


def is_blank(piece: bytes) -> bool:
    """Whether a line holds nothing but JSON's blanks: no reader finds a message in it."""
    return not piece.strip(_BLANK)


@dataclass(frozen=True)
class Oversize:
    """A line too long to keep: its length and the SHA-256 of its bytes (hashed as they
    went by), so the record can say which message it was without holding it."""

    size: int
    sha256: str


@dataclass(frozen=True)
class Split:
    """A newline-ended line that a bare `\r` splits into several messages (or message
    parts) for a reader with universal newlines: said after those messages, so its record
    can say that servers read it differently (its size and SHA-256, the `\r`s included)."""

    size: int
    sha256: str
    pieces: int  # the lines in it that are not blank


@dataclass
class Framer:
    """Newline-delimited messages out of arbitrary chunks; one per direction. `universal`:
    a bare `\r` ends a message too, as the Python SDK's server reads its stdin."""

    parts: list[bytes] = field(default_factory=list)
    size: int = 0
    oversized: Any = None  # the hash of a line too long to keep, as it goes by
    skipping: bool = False  # after a gap: the rest of a message whose start was dropped
    universal: bool = False
    cr: bool = False  # universal: the last chunk ended with a \r (a \n next is its \r\n)
    whole: Any = None  # universal: the hash of the \n-ended line the pieces are part of
    whole_size: int = 0
    pieces: int = 0  # universal: the lines of the \n-ended line that are not blank

    def feed(self, chunk: bytes) -> Iterator[bytes | Oversize | Split]:
        """Complete lines (without their end), an Oversize for one too long to keep, and
        (universal) a Split after the pieces of a line a bare `\r` cut."""
        if self.universal:
            yield from self._feed_universal(chunk)
            return
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

    def _feed_universal(self, chunk: bytes) -> Iterator[bytes | Oversize | Split]:
        start = 0
        if self.cr and chunk.startswith(b"\n"):
            start = 1  # the \n of a \r\n cut between two chunks: it ends no other line
            self._whole(b"\n")
            if (split := self._line_done()) is not None:
                yield split
        self.cr = False
        if self.skipping:
            m = _END.search(chunk, start)
            if m is None:
                return
            start, self.skipping = m.end(), False
            if m.group() != b"\r":
                self._reset_whole()
        while True:
            m = _END.search(chunk, start)
            if m is None:
                rest = chunk[start:]
                if rest:
                    self._whole(rest)
                    self._keep(rest)
                return
            self._whole(chunk[start : m.end()])
            self._keep(chunk[start : m.start()])
            if self.oversized is not None:
                self.pieces += 1
                yield Oversize(self.size, self.oversized.hexdigest())
            else:
                piece = b"".join(self.parts)
                self.pieces += not is_blank(piece)
                yield piece
            self.parts, self.size, self.oversized = [], 0, None
            start = m.end()
            if m.group() == b"\r":
                self.cr = start == len(chunk)  # a \n may follow in the next chunk
                continue
            if (split := self._line_done()) is not None:
                yield split

    def _whole(self, data: bytes) -> None:
        if self.whole is None:
            self.whole = hashlib.sha256()
        self.whole.update(data)
        self.whole_size += len(data)

    def _reset_whole(self) -> None:
        self.whole, self.whole_size, self.pieces = None, 0, 0

    def _line_done(self) -> Split | None:
        """A \n ended the line: a Split when a \r had cut it into several messages."""
        split = None
        if self.pieces > 1 and self.whole is not None:
            split = Split(self.whole_size, self.whole.hexdigest(), self.pieces)
        self._reset_whole()
        return split

    def split_at_end(self) -> Split | None:
        """At the end of the stream: the Split of a last line without its `\n`, if any."""
        if not self.universal:
            return None
        rest = self.rest()
        self.pieces += self.size > 0 and (rest is None or not is_blank(rest))
        return self._line_done()

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
        self.cr = False
        self._reset_whole()

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
