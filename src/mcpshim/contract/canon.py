"""The canonical form of an MCP definition, and its hash.

A tool is pinned by what a client shows the model: its name, title, description, input and
output schemas and annotations (`_meta`, icons and the like are left out: they change
nothing the model reads). Resources and prompts likewise. The canonical form is JSON with
sorted keys, no whitespace and UTF-8 text, hashed with SHA-256; the relay, the enforcing
relay and review all hash through `definition_hash`, so none of them can disagree about
whether a definition changed.

`order_hash` is the hash of the same definition with its order taken out: the items of
every JSON list sorted (but `prefixItems`, a tuple's positions) and, in each `description`
and `title`, the items of every list written in the text (`git, cat, sh`; `a | b`) sorted.
Two definitions with one order hash and two definition hashes differ only in the order of
the same items: what a server that builds its description from a Python set does at every
start. A drift whose order hash is the approved one is graded info and not refused; any
other (a word, a parameter, a wider schema) keeps its weight (contract.drift says what).

Both are linear in the definition, and the lists of a text are sorted only in a text of at
most ORDER_TEXT_MAX characters: a longer one keeps its order (its reorders count as
changes, which is stricter), so a 10 MB description costs a hash, not a minute.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "KEYS",
    "ORDER_TEXT_MAX",
    "canonical",
    "definition",
    "definition_hash",
    "digest",
    "order_free",
    "order_hash",
    "short",
    "sorted_lists",
]

#: what each kind of definition is pinned by
KEYS: Mapping[str, tuple[str, ...]] = {
    "tool": ("name", "title", "description", "inputSchema", "outputSchema", "annotations"),
    "resource": ("uri", "name", "title", "description", "mimeType", "annotations"),
    "prompt": ("name", "title", "description", "arguments"),
    "server": ("instructions", "capabilities"),
}


def canonical(value: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8 (lone surrogates kept as they came)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def definition(kind: str, item: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a listed item that is pinned (keys it lacks stay absent)."""
    return {k: item[k] for k in KEYS[kind] if k in item}


def definition_hash(kind: str, item: Mapping[str, Any]) -> str:
    return digest(definition(kind, item))


#: one item of a list written in text: a quoted string, or up to 8 words of anything but
#: separators and brackets (bounded, so a long line without a separator stays linear)
_CHAR = r"[^\s,;|()\[\]{}<>:'\"`]"
_WORD = rf"{_CHAR}+"
_ITEM = rf"(?:'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`|{_WORD}(?:[ \t]+{_WORD}){{0,7}})"
#: A list starts where a word starts, never inside one: a match tried at each character of
#: a long word ran over the rest of it every time (quadratic: 9.4 s for 20,000 characters).
#: Inside a word no match can start that the word's own start did not already try.
_FIRST = rf"(?:'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`|(?<!{_CHAR}){_WORD}(?:[ \t]+{_WORD}){{0,7}})"
_LIST = re.compile(rf"({_FIRST})(?P<sep>[ \t]*[,;|][ \t]*)({_ITEM})(?:(?P=sep){_ITEM})*")
_ITEMS = re.compile(_ITEM)
_TEXT_KEYS = frozenset({"description", "title"})
#: longest text whose lists are sorted (about 60 ms of matching at worst; 10 MB took 10 s)
ORDER_TEXT_MAX = 64 << 10
_TUPLE_KEYS = frozenset({"prefixItems"})  # positions mean something there


def sorted_lists(text: str) -> str:
    """`text` with the items of each list written in it (one separator, repeated) sorted;
    a text longer than ORDER_TEXT_MAX as it is."""
    if len(text) > ORDER_TEXT_MAX:
        return text

    def one(m: re.Match[str]) -> str:
        return m.group("sep").join(sorted(_ITEMS.findall(m.group(0))))

    return _LIST.sub(one, text)


def order_free(value: Any, key: str = "") -> Any:
    """`value` with its order taken out (see the module's docstring)."""
    if isinstance(value, dict):
        return {k: order_free(v, k) for k, v in value.items()}
    if isinstance(value, list):
        items = [order_free(v) for v in value]
        return items if key in _TUPLE_KEYS else sorted(items, key=canonical)
    if isinstance(value, str) and key in _TEXT_KEYS:
        return sorted_lists(value)
    return value


def order_hash(kind: str, item: Mapping[str, Any]) -> str:
    """The hash of the pinned definition with its order taken out."""
    return digest(order_free(definition(kind, item)))


def short(sha: str) -> str:
    """A hash as cards and messages show it."""
    return f"sha256:{sha[:12]}" if sha else "sha256:?"
