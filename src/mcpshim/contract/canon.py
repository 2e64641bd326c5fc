"""The canonical form of an MCP definition, and its hash.

A tool is pinned by what a client shows the model: its name, title, description, input and
output schemas and annotations (`_meta`, icons and the like are left out: they change
nothing the model reads). Resources and prompts likewise. The canonical form is JSON with
sorted keys, no whitespace and UTF-8 text, hashed with SHA-256; the relay, the enforcing
relay and review all hash through `definition_hash`, so none of them can disagree about
whether a definition changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["KEYS", "canonical", "definition", "definition_hash", "digest", "short"]

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


def short(sha: str) -> str:
    """A hash as cards and messages show it."""
    return f"sha256:{sha[:12]}" if sha else "sha256:?"
