"""What a redaction leaves in its place: `[REDACTED:<rule>]`. A reader of the log (review's
secret rules) needs only this, not the table and its 50 ms of patterns (redact)."""

from __future__ import annotations

import re

__all__ = ["MARKER_RE", "marker"]

MARKER_RE = re.compile(rb"\[REDACTED:([a-z0-9-]+)\]")


def marker(name: str) -> bytes:
    return b"[REDACTED:" + name.encode() + b"]"
