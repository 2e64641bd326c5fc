"""A large message of the server's read without building it whole.

Parsed at once, a JSON message takes 20 to 40 times its size as Python objects: a
tools/list of 100,000 tools (7.5 MB) took 317 MiB in the recorder. What the relay needs of
a response is its id, its error and a few members of its result, and, for a listing, each
item in turn. So a line of STREAM_MIN bytes or more that is one JSON object is read in two
passes: the first walks it member by member (the stdlib's decoder, one value at a time)
and keeps the message with every list directly in its `result` left empty (`Skeleton.doc`),
noting where each list's items lie; `Skeleton.items` then decodes a list's items one at a
time, so what is held is the line, its text and one item. The values are those
`json.loads` gives (duplicate keys: the last wins); anything else (a batch, bytes that are
not UTF-8, a syntax error, nesting past the decoder) gives None, and the caller parses
the line whole as before, so what counts as JSON, and why not, is unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["STREAM_MIN", "Skeleton", "skeleton"]

STREAM_MIN = 1 << 20  # a line this long or longer is read by its skeleton
_WS = re.compile(r"[ \t\n\r]*")
_DECODE = json.JSONDecoder(strict=True).raw_decode


def _ws(text: str, i: int) -> int:
    m = _WS.match(text, i)
    return m.end() if m else i


@dataclass(frozen=True)
class Skeleton:
    """A message with the lists of its result left empty, and where their items lie."""

    doc: dict[str, Any]
    text: str
    lists: dict[str, int]  # a key of the result -> where its list opens ('[') in text

    def items(self, key: str) -> Iterator[tuple[Any, int]]:
        """The items of the result's list `key`, one at a time, each with its length in
        characters (none when the result held no list there)."""
        start = self.lists.get(key)
        if start is None:
            return
        text, i = self.text, _ws(self.text, start + 1)
        if text[i : i + 1] == "]":
            return
        while True:
            value, end = _DECODE(text, i)
            yield value, end - i
            i = _ws(text, end)
            if text[i : i + 1] != ",":
                return  # the first pass saw it end here with "]"
            i = _ws(text, i + 1)


def _skip_list(text: str, i: int) -> int:
    """Past a list opening at i, decoding its items one at a time (each checked, none
    kept); ValueError when it is no JSON list."""
    i = _ws(text, i + 1)
    if text[i : i + 1] == "]":
        return i + 1
    while True:
        _value, i = _DECODE(text, i)
        i = _ws(text, i)
        c = text[i : i + 1]
        if c == "]":
            return i + 1
        if c != ",":
            raise ValueError("expected , or ] in a list")
        i = _ws(text, i + 1)


def _members(text: str, i: int, result: bool, lists: dict[str, int]) -> tuple[dict[str, Any], int]:
    """The object opening at i, member by member, and where it ends. In the result
    (`result`), a list is noted in `lists` and kept empty; at the top, the result is read
    so too."""
    out: dict[str, Any] = {}
    i = _ws(text, i + 1)
    if text[i : i + 1] == "}":
        return out, i + 1
    while True:
        if text[i : i + 1] != '"':
            raise ValueError("expected a member's name")
        key, i = _DECODE(text, i)
        i = _ws(text, i)
        if text[i : i + 1] != ":":
            raise ValueError("expected :")
        i = _ws(text, i + 1)
        c = text[i : i + 1]
        lists.pop(key, None) if result else None  # a later duplicate replaces it
        if result and c == "[":
            lists[key] = i
            out[key], i = [], _skip_list(text, i)
        elif not result and key == "result" and c == "{":
            lists.clear()  # a duplicate result replaces the first, lists and all
            out[key], i = _members(text, i, True, lists)
        else:
            if not result and key == "result":
                lists.clear()
            out[key], i = _DECODE(text, i)
        i = _ws(text, i)
        c = text[i : i + 1]
        if c == "}":
            return out, i + 1
        if c != ",":
            raise ValueError("expected , or }")
        i = _ws(text, i + 1)


def skeleton(line: bytes) -> Skeleton | None:
    """The line's skeleton, or None when it is not one JSON object in UTF-8 text (the
    caller parses it whole, and says why it could not)."""
    try:
        text = line.decode("utf-8")
        i = _ws(text, 0)
        if text[i : i + 1] != "{":
            return None
        lists: dict[str, int] = {}
        doc, end = _members(text, i, False, lists)
        if _ws(text, end) != len(text):
            return None
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError too
        return None
    return Skeleton(doc, text, lists)
