"""Credentials out of the JSON an MCP message carries, before a tool call is recorded.

The same token rules as the shims' scrubber (redact), applied to every string of a value,
keys included, plus the credential-named keys (api_key, GITHUB_TOKEN, password...) whose
scalar values are blanked whole. Long strings are cut, and only the part kept is scanned.
"""

from __future__ import annotations

from typing import Any

from mcpshim.log.redact import is_credential_name, marker, redact_text

__all__ = ["MAX_STRING", "redact_json"]

MAX_STRING = 2048  # longer argument strings are cut in the record (after redaction)
_MARGIN = 256  # longer than any token rule's minimum length


def _redact_str(value: str, hits: list[str]) -> str:
    """Redact, then cut to MAX_STRING. Only the head that is kept is scanned (plus a margin,
    so a token that crosses the cut is still long enough to be recognised and replaced):
    a 1 MiB argument costs microseconds, not the tens of milliseconds a full scan holds
    the interpreter for."""
    head = value[: MAX_STRING + _MARGIN]
    raw = head.encode("utf-8", "surrogatepass")
    red = redact_text(raw, hits)
    text = red.decode("utf-8", "surrogatepass") if red != raw else head
    if len(value) <= MAX_STRING and len(text) <= MAX_STRING:
        return text
    hits.append("truncated")
    more = max(0, len(value) - MAX_STRING)
    return text[:MAX_STRING] + f"...[{more} more characters not recorded]"


def redact_json(value: Any, hits: list[str]) -> Any:
    """A JSON value with token-shaped secrets replaced and credential-named keys blanked.

    Strings (keys too) go through `redact_text`; the value of a key that
    `is_credential_name` flags (api_key, GITHUB_TOKEN, password...) is replaced whole unless
    it is a container, which is walked. Strings longer than MAX_STRING are cut, and no cut
    can leave part of a token in the record.
    """
    if isinstance(value, str):
        return _redact_str(value, hits)
    if isinstance(value, list):
        return [redact_json(v, hits) for v in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = _redact_str(str(k), hits)
            if is_credential_name(key) and not isinstance(v, (dict, list)) and v is not None:
                out[key] = marker("credential-name").decode()
                hits.append("credential-name")
            else:
                out[key] = redact_json(v, hits)
        return out
    return value
