"""One record framed for the log, the writer's half of log.framing, on bytes alone: `run`
frames its session's first record before its server starts, where framing's readers
(dataclasses, typing) would load first."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["encode_record"]


def encode_record(kind: str, fields: Iterable[bytes]) -> bytes:
    """Frame one record; refuses a NUL in any field so framing cannot be broken from Python."""
    parts = [b"\0R\0=1\0=", kind.encode()]
    for f in fields:
        if b"\0" in f:
            raise ValueError("a record field cannot hold a NUL byte")
        parts += [b"\0=", f]
    parts.append(b"\0\n")
    return b"".join(parts)
