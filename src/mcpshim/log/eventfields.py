"""Typed values out of an event record's data, where a field may be missing or of another
type than mcpshim writes (a hand-edited or foreign log): None then, never an exception.
Shared by the typed views of the tracer's records (netrecords, filerecords)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

__all__ = ["as_int", "as_str", "as_time", "text_bytes"]


def as_time(v: Any) -> datetime | None:
    """An ISO 8601 time, UTC when it names no zone."""
    if not isinstance(v, str):
        return None
    try:
        t = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def text_bytes(d: Mapping[str, Any], name: str) -> bytes | None:
    """A text field's exact bytes (its `_b64` twin when it was not UTF-8)."""
    b64 = d.get(f"{name}_b64")
    if isinstance(b64, str):
        try:
            return base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            pass
    v = d.get(name)
    return v.encode("utf-8") if isinstance(v, str) else None


def as_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def as_str(v: Any) -> str | None:
    return v if isinstance(v, str) else None
