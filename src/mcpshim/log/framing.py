"""The exec log's framing: where each record or spill pointer starts and ends.

Every NUL in the log is followed by a tag byte (see execlog): a record is everything
between two end markers `\\0\\n`, from its last `\\0R` (or `\\0P`, a spill pointer); bytes
before that are a torn record, a piece with neither is not a record. Nothing here decodes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from mcpshim.log.frame import encode_record

__all__ = ["LogProblem", "Readable", "bodies", "body_of", "encode_record", "pieces"]

_CHUNK = 1 << 20


class Readable(Protocol):
    """What the framing reads from: a file, or a view of part of one."""

    def read(self, n: int = -1, /) -> bytes: ...


@dataclass(frozen=True)
class LogProblem:
    """Something in the log that is not a whole record; reported, never fatal."""

    where: str
    message: str


def pieces(
    stream: Readable, name: str, problems: list[LogProblem], base: int = 0
) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) between two end markers, empty ones skipped; a trailing piece
    without its end marker goes to `problems`. Memory holds one chunk plus the largest
    record."""
    carry = b""  # pos: the file offset of carry[0] (of the stream's start at first)
    pos = base
    while True:
        chunk = stream.read(_CHUNK)
        buf = carry + chunk if carry else chunk
        pieces = buf.split(b"\0\n")
        carry = pieces.pop()  # after the last end marker: the next chunk completes it
        del buf  # memory holds the chunk, its pieces and the carry (about three chunks)
        for piece in pieces:
            if piece:
                yield pos, piece
            pos += len(piece) + 2
        if not chunk:
            if carry:
                problems.append(
                    LogProblem(f"{name}@{pos}", "torn trailing record (cut short while written)")
                )
            return


def body_of(pos: int, piece: bytes, name: str, problems: list[LogProblem]) -> tuple[int, bytes]:
    """(offset, body) of the record or pointer a piece ends with, `\\0R...`/`\\0P...`;
    offset -1 when the piece holds none. Bytes before it go to `problems`."""
    start = max(piece.rfind(b"\0R"), piece.rfind(b"\0P"))
    if start < 0:
        problems.append(LogProblem(f"{name}@{pos}", "bytes outside any record"))
        return -1, b""
    if start > 0:
        problems.append(LogProblem(f"{name}@{pos}", "torn record skipped"))
    return pos + start, piece[start:]


def bodies(
    stream: Readable, name: str, problems: list[LogProblem], base: int = 0
) -> Iterator[tuple[int, bytes]]:
    """The framing: (offset, body) for each record or pointer, `\\0R...`/`\\0P...` without
    its end marker; what is not a whole record goes to `problems`."""
    for pos, piece in pieces(stream, name, problems, base):
        at, body = body_of(pos, piece, name, problems)
        if at >= 0:
            yield at, body
