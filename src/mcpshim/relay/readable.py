"""Whether a relayed line can be read completely, and if not, why and which ids it carries.

Under `--enforce` the gate decides on what it reads; a message it cannot read completely
must never pass as approved, since its peer may read it all the same: a line past the
relay's limit (a client has none), one nested deeper than the parser goes, one holding a
byte that is not UTF-8 (the SDK's server decodes with errors="replace"). `read` returns
the parsed message, or an `Unreadable` with its cause (a stable word, CAUSES) and the
JSON-RPC ids it was found to carry: from a lenient parse when only the text's encoding
failed, else from the start of the line when it opens as a JSON-RPC object does
(`{"jsonrpc": "2.0", "id": 7, ...`: what the SDKs write), never guessed from inside it.

A client's line is also one the gate must frame as every server would: the Python SDK's
server ends a line at a bare `\r` too (universal newlines), the TypeScript one at `\n`
only. `read_request` refuses a line a bare `\r` cuts into more than one message or part of
one (`line-ends`): one server would read an approved call where another reads a hidden one
(`{"id": 20, ..., "x":\r{... "name": "evil" ...}\r}`). Its ids are the line's own and
those of every piece that reads as a message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from mcpshim.relay.core import MAX_MESSAGE
from mcpshim.relay.framer import is_blank, universal_lines

__all__ = ["CAUSES", "Lines", "Unreadable", "early_id", "read", "read_request"]

#: why a message cannot be read, as records and review say it
CAUSES = {
    "too-large": "larger than the relay's message limit",
    "too-deep": "nested deeper than the parser goes",
    "not-utf8": "not UTF-8 text",
    "not-json": "not JSON",
    "not-json-rpc": "not a JSON-RPC object or a batch of them",
    "incomplete": "cut short at the end of the stream",
    "line-ends": "cut by a bare carriage return into lines servers read differently",
}
_HEAD = 4096  # how much of a line's start early_id looks at
_STR = rb'"(?:[^"\\\n]|\\.)*"'
_EARLY = re.compile(
    rb'\s*\{\s*(?:"(?:jsonrpc|method)"\s*:\s*' + _STR + rb"\s*,\s*)*"
    rb'"id"\s*:\s*(-?[0-9]+|' + _STR + rb"|null)\s*[,}]"
)


@dataclass(frozen=True)
class Unreadable:
    cause: str
    ids: tuple[Any, ...] = ()  # JSON-RPC ids it carries, when they could be found exactly

    @property
    def why(self) -> str:
        return CAUSES[self.cause]


def early_id(head: bytes) -> tuple[Any, ...]:
    """The id of a line that opens as a JSON-RPC object with its id among its first
    members (after `jsonrpc` and `method` only); () when it does not."""
    m = _EARLY.match(head[:_HEAD])
    if m is None:
        return ()
    try:
        return (json.loads(m.group(1)),)
    except ValueError:
        return ()


def _ids(doc: Any) -> tuple[Any, ...]:
    items = doc if isinstance(doc, list) else [doc]
    return tuple(i["id"] for i in items if isinstance(i, dict) and "id" in i)


def read(line: bytes) -> Any:
    """The message (an object, or a non-empty batch of objects), or an Unreadable."""
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            doc = json.loads(line)
        except RecursionError:
            return Unreadable("too-deep", early_id(line))
        except UnicodeDecodeError:
            try:  # what a peer that replaces bad bytes reads
                loose = json.loads(line.decode("utf-8", "surrogateescape"))
            except (ValueError, RecursionError):
                return Unreadable("not-utf8", early_id(line))
            return Unreadable("not-utf8", _ids(loose))
        except ValueError:
            return Unreadable("not-json", early_id(line))
    if isinstance(doc, dict):
        return doc
    if isinstance(doc, list) and doc and all(isinstance(i, dict) for i in doc):
        return doc
    return Unreadable("not-json-rpc", _ids(doc))


def read_request(line: bytes) -> Any:
    """`read` for a client's line (with or without its newline), which is first held to
    one framing: a line a bare `\r` cuts into several lines that are not blank is an
    Unreadable (`line-ends`) carrying every id found in it."""
    if b"\r" in line:
        pieces = [p for p in universal_lines(line) if not is_blank(p)]
        if len(pieces) > 1:
            ids = list(early_id(line))
            for piece in pieces:
                doc = read(piece)
                found = doc.ids if isinstance(doc, Unreadable) else _ids(doc)
                ids += [i for i in found if i not in ids]
            return Unreadable("line-ends", tuple(ids))
    return read(line)


class Lines:
    """Whole lines out of chunks, for the gate; a line longer than MAX_MESSAGE comes in
    pieces (bounded memory), flagged False: its head (the first MAX_MESSAGE bytes and
    more) first, its last piece ending with the newline. The gate decides at the head."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.through = False  # inside a line too long to hold

    def feed(self, chunk: bytes) -> Iterator[tuple[bytes, bool]]:
        """(bytes, whole): a whole line with its newline, or a piece of an overlong one."""
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                rest = chunk[start:]
                if self.through:
                    if rest:
                        yield rest, False
                elif rest:
                    self.parts.append(rest)
                    self.size += len(rest)
                    if self.size > MAX_MESSAGE:
                        yield b"".join(self.parts), False
                        self.parts, self.size, self.through = [], 0, True
                return
            piece = chunk[start : nl + 1]
            if self.through:
                yield piece, False
            elif self.parts:
                yield b"".join([*self.parts, piece]), True
            else:
                yield piece, True
            self.parts, self.size, self.through = [], 0, False
            start = nl + 1

    def rest(self) -> bytes:
        return b"".join(self.parts)
