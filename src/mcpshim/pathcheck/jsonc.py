"""A small JSON-with-comments parser that remembers where every value sits in the text.

VS Code's mcp.json may hold `//` and `/* */` comments and trailing commas, which stdlib json
rejects and which a load/dump round trip would drop. This parser keeps the character span
of every value and member, so wrap-config can edit a file surgically at those spans and
leave every comment, blank line and indentation exactly as the user wrote it.
Plain JSON parses to the same values as `json.loads` (a test checks both on one corpus).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Comment", "Document", "JsoncError", "Member", "Node", "parse", "position"]


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


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_WORDS = {"true": True, "false": False, "null": None}


class _Parser:
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
        text, n = self.text, len(self.text)
        while self.pos < n:
            ch = text[self.pos]
            if ch in " \t\r\n":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                end = n if end < 0 else end
                self.comments.append(Comment(self.pos, end, text[self.pos : end]))
                self.pos = end
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unterminated /* comment")
                self.comments.append(Comment(self.pos, end + 2, text[self.pos : end + 2]))
                self.pos = end + 2
            else:
                return

    def value(self, depth: int = 0) -> Node:
        if depth > 200:
            raise self.fail("nested too deeply")
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of file, expected a value")
        ch = self.text[self.pos]
        if ch == "{":
            return self.obj(depth)
        if ch == "[":
            return self.arr(depth)
        if ch == '"':
            start = self.pos
            text = self.string()
            return Node("string", start, self.pos, text)
        m = _NUMBER.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            return Node("number", m.start(), m.end(), json.loads(m.group()))
        for word, val in _WORDS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return Node(word, self.pos - len(word), self.pos, val)
        raise self.fail(f"unexpected character {ch!r}")

    def string(self) -> str:
        m = _STRING.match(self.text, self.pos)
        if not m:
            raise self.fail("malformed or unterminated string")
        self.pos = m.end()
        result: str = json.loads(m.group())
        return result

    def obj(self, depth: int) -> Node:
        start = self.pos
        self.pos += 1
        members: list[Member] = []
        value: dict[str, Any] = {}
        while True:
            self.skip()
            if self.text.startswith("}", self.pos):
                if members and self._last_was_comma:
                    self.trailing += 1
                self.pos += 1
                break
            if members and not self._last_was_comma:
                raise self.fail("expected ',' or '}' after an object member")
            if not self.text.startswith('"', self.pos):
                raise self.fail("expected a string key or '}'")
            key_start = self.pos
            key = self.string()
            key_end = self.pos
            self.skip()
            if not self.text.startswith(":", self.pos):
                raise self.fail(f"expected ':' after key {key!r}")
            self.pos += 1
            node = self.value(depth + 1)
            members.append(Member(key, key_start, key_end, node))
            value[key] = node.value
            self._comma()
        return Node("object", start, self.pos, value, members=tuple(members))

    def arr(self, depth: int) -> Node:
        start = self.pos
        self.pos += 1
        items: list[Node] = []
        while True:
            self.skip()
            if self.text.startswith("]", self.pos):
                if items and self._last_was_comma:
                    self.trailing += 1
                self.pos += 1
                break
            if items and not self._last_was_comma:
                raise self.fail("expected ',' or ']' after an array item")
            items.append(self.value(depth + 1))
            self._comma()
        return Node("array", start, self.pos, [n.value for n in items], items=tuple(items))

    _last_was_comma = False

    def _comma(self) -> None:
        self.skip()
        self._last_was_comma = self.text.startswith(",", self.pos)
        if self._last_was_comma:
            self.pos += 1


def parse(text: str) -> Document:
    """Parse JSON with comments and trailing commas; raise JsoncError with a position."""
    p = _Parser(text)
    if text.startswith("\ufeff"):
        p.pos = 1
    root = p.value()
    p.skip()
    if p.pos != len(text):
        raise p.fail("unexpected text after the top-level value")
    return Document(text, root, tuple(p.comments), p.trailing)


def comments_in(doc: Document, spans: Sequence[tuple[int, int]]) -> list[Comment]:
    """The comments that lie inside any of the given spans (an edit there would drop them)."""
    return [c for c in doc.comments for s, e in spans if s <= c.start and c.end <= e]
