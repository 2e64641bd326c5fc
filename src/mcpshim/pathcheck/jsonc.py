"""A small JSON-with-comments parser that remembers where every value sits in the text.

VS Code's mcp.json may hold `//` and `/* */` comments and trailing commas, which stdlib json
rejects and which a load/dump round trip would drop. This parser keeps the character span
of every value and member, so wrap-config can edit a file surgically at those spans and
leave every comment, blank line and indentation exactly as the user wrote it.
Plain JSON parses to the same values as `json.loads` (a test checks both on one corpus).
"""

from __future__ import annotations

import bisect
import gc
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Comment",
    "Document",
    "JsoncError",
    "Member",
    "Node",
    "Positions",
    "parse",
    "position",
]


class JsoncError(ValueError):
    """Malformed input, with the 1-based line and column where parsing stopped."""

    def __init__(self, message: str, offset: int, line: int, column: int) -> None:
        super().__init__(f"{message} (line {line}, column {column})")
        self.reason = message
        self.offset = offset
        self.line = line
        self.column = column


@dataclass(frozen=True)
class Member:
    key: str
    key_start: int
    key_end: int
    value: Node


@dataclass(frozen=True)
class Node:
    """One JSON value: its kind, its span [start, end) in the text and its Python value."""

    kind: str  # object | array | string | number | true | false | null
    start: int
    end: int
    value: Any
    members: tuple[Member, ...] = ()
    items: tuple[Node, ...] = ()

    def member(self, key: str) -> Member | None:
        """The member a JSON reader would use for `key` (the last one, as json.loads does)."""
        found = None
        for m in self.members:
            if m.key == key:
                found = m
        return found

    def get(self, key: str) -> Node | None:
        m = self.member(key)
        return m.value if m else None


@dataclass(frozen=True)
class Comment:
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Document:
    text: str
    root: Node
    comments: tuple[Comment, ...]
    trailing_commas: int

    @property
    def plain_json(self) -> bool:
        return not self.comments and not self.trailing_commas


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


class Positions:
    """`position` for many offsets of one text: a bisect over its line starts, so naming
    the line of every server of a large config costs log(lines) each, not a scan."""

    def __init__(self, text: str) -> None:
        self._starts = [0, *(m.end() for m in re.finditer("\n", text))]

    def __call__(self, offset: int) -> tuple[int, int]:
        i = bisect.bisect_right(self._starts, offset) - 1
        return i + 1, offset - self._starts[i] + 1


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_WORDS = {"true": True, "false": False, "null": None}
#: whitespace and whole comments between two tokens, in one match (comments are rare)
_GAP = re.compile(r"(?:[ \t\r\n]+|//[^\n]*|/\*.*?\*/)*", re.S)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
MAX_DEPTH = 200


class _Parser:
    """Recursive descent over the text, one regex match per token or gap: a config with
    20,000 servers parses in about a second."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.comments: list[Comment] = []
        self.trailing = 0

    def fail(self, message: str, offset: int | None = None) -> JsoncError:
        at = self.pos if offset is None else offset
        line, column = position(self.text, at)
        return JsoncError(message, at, line, column)

    def skip(self) -> None:
        text, pos = self.text, self.pos
        end = _GAP.match(text, pos).end()  # type: ignore[union-attr]
        if end != pos and "/" in text[pos:end]:
            for m in _COMMENT.finditer(text, pos, end):
                self.comments.append(Comment(m.start(), m.end(), m.group()))
        self.pos = end
        if text.startswith("/*", end):
            raise self.fail("unterminated /* comment")

    def value(self, depth: int = 0) -> Node:
        if depth > MAX_DEPTH:
            raise self.fail("nested too deeply")
        self.skip()
        text, pos = self.text, self.pos
        if pos >= len(text):
            raise self.fail("unexpected end of file, expected a value")
        ch = text[pos]
        if ch == '"':
            value = self.string()
            return Node("string", pos, self.pos, value)
        if ch == "{":
            return self.obj(depth)
        if ch == "[":
            return self.arr(depth)
        m = _NUMBER.match(text, pos)
        if m:
            self.pos = m.end()
            try:
                number = json.loads(m.group())
            except ValueError:  # more digits than int() converts
                raise self.fail("number too long", pos) from None
            return Node("number", pos, self.pos, number)
        for word, val in _WORDS.items():
            if text.startswith(word, pos):
                self.pos += len(word)
                return Node(word, pos, self.pos, val)
        raise self.fail(f"unexpected character {ch!r}")

    def string(self) -> str:
        m = _STRING.match(self.text, self.pos)
        if not m:
            raise self.fail("malformed or unterminated string")
        self.pos = m.end()
        if "\\" not in m.group():  # nothing to unescape: the text between the quotes
            return m.group()[1:-1]
        result: str = json.loads(m.group())
        return result

    def obj(self, depth: int) -> Node:
        text = self.text
        start = self.pos
        self.pos += 1
        members: list[Member] = []
        value: dict[str, Any] = {}
        comma = False
        while True:
            self.skip()
            pos = self.pos
            if text.startswith("}", pos):
                if members and comma:
                    self.trailing += 1
                self.pos += 1
                break
            if members and not comma:
                raise self.fail("expected ',' or '}' after an object member")
            if not text.startswith('"', pos):
                raise self.fail("expected a string key or '}'")
            key = self.string()
            key_end = self.pos
            self.skip()
            if not text.startswith(":", self.pos):
                raise self.fail(f"expected ':' after key {key!r}")
            self.pos += 1
            node = self.value(depth + 1)
            members.append(Member(key, pos, key_end, node))
            value[key] = node.value
            comma = self._comma()
        return Node("object", start, self.pos, value, members=tuple(members))

    def arr(self, depth: int) -> Node:
        text = self.text
        start = self.pos
        self.pos += 1
        items: list[Node] = []
        comma = False
        while True:
            self.skip()
            if text.startswith("]", self.pos):
                if items and comma:
                    self.trailing += 1
                self.pos += 1
                break
            if items and not comma:
                raise self.fail("expected ',' or ']' after an array item")
            items.append(self.value(depth + 1))
            comma = self._comma()
        return Node("array", start, self.pos, [n.value for n in items], items=tuple(items))

    def _comma(self) -> bool:
        self.skip()
        if self.text.startswith(",", self.pos):
            self.pos += 1
            return True
        return False


def parse(text: str) -> Document:
    """Parse JSON with comments and trailing commas; raise JsoncError with a position.

    The cyclic garbage collector is paused meanwhile: the tree holds no cycles, and its
    passes over a growing tree of nodes would make a large file cost more per server."""
    p = _Parser(text)
    if text.startswith("\ufeff"):
        p.pos = 1
    paused = gc.isenabled()
    gc.disable()
    try:
        root = p.value()
        p.skip()
    finally:
        if paused:
            gc.enable()
    if p.pos != len(text):
        raise p.fail("unexpected text after the top-level value")
    return Document(text, root, tuple(p.comments), p.trailing)


def comments_in(doc: Document, spans: Sequence[tuple[int, int]]) -> list[Comment]:
    """The comments that lie inside any of the given spans (an edit there would drop them)."""
    return [c for c in doc.comments for s, e in spans if s <= c.start and c.end <= e]
