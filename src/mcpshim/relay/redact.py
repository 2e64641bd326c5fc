"""Credentials out of the JSON an MCP message carries, before a tool call is recorded.

The same rules as every other writer (log.redact_rules), applied to every string of a value,
keys included, plus the credential-named keys (token, apiKey, accessToken, authorization,
password, pass, secret, key, GITHUB_TOKEN...) whose values are blanked whole. Long strings
are cut, and only the part kept is scanned (with what a secret there could run on into).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from mcpshim.log.redact import is_credential_key, marker, redact_argv, redact_text
from mcpshim.log.redact_rules import URL_STOP

__all__ = ["MAX_STRING", "redact_json"]

MAX_STRING = 2048  # longer argument strings are cut in the record (after redaction)
_MARGIN = 256  # longer than any token rule's minimum length
_CACHED = 64  # a string this short is redacted once per recorder (_short)
_WORD_END = re.compile("[" + re.escape(URL_STOP) + "]")
_BLANKED = marker("credential-name").decode()


def _head(value: str) -> str:
    """The part of a string that is scanned: what is kept (MAX_STRING), a margin (so that a
    token crossing the cut is still long enough to be recognised) and the rest of the word
    the margin ends in (a URL's password is known by the `@` after it, however far). A
    1 MiB argument with blanks costs microseconds, not the tens of milliseconds a full scan
    holds the interpreter for."""
    if len(value) <= MAX_STRING + _MARGIN:
        return value
    end = _WORD_END.search(value, MAX_STRING + _MARGIN)
    return value[: end.start()] if end else value


def _cut(value: str, text: str, hits: list[str]) -> str:
    """text (the redacted head of value) as the record keeps it."""
    if len(value) <= MAX_STRING and len(text) <= MAX_STRING:
        return text
    hits.append("truncated")
    more = max(0, len(value) - MAX_STRING)
    return text[:MAX_STRING] + f"...[{more} more characters not recorded]"


def _redact_str(value: str, hits: list[str]) -> str:
    """Redact the head (see _head), then cut to MAX_STRING; a short string through a cache
    (a listing's schemas repeat the same keys and types thousands of times)."""
    if len(value) <= _CACHED:
        text, fired = _short(value)
        hits.extend(fired)
        return text
    return _redact(value, hits)


@functools.lru_cache(maxsize=8192)
def _short(value: str) -> tuple[str, tuple[str, ...]]:
    fired: list[str] = []
    return _redact(value, fired), tuple(fired)


def _redact(value: str, hits: list[str]) -> str:
    head = _head(value)
    raw = head.encode("utf-8", "surrogatepass")
    red = redact_text(raw, hits)
    return _cut(value, red.decode("utf-8", "surrogatepass") if red != raw else head, hits)


def _blank(value: Any, hits: list[str]) -> Any:
    """Every scalar under a credential-named key, however deep, is the credential."""
    if isinstance(value, list):
        return [_blank(v, hits) for v in value]
    if isinstance(value, dict):
        return {_redact_str(str(k), hits): _blank(v, hits) for k, v in value.items()}
    if value is None:
        return None
    hits.append("credential-name")
    return _BLANKED


def _argv(value: list[str], hits: list[str]) -> list[str]:
    """A list of strings read as a command line, as every argv writer reads one: the value
    after `--password`, `-p` after mysql, a bare AWS secret key."""
    heads = [_head(v) for v in value]
    raw = [h.encode("utf-8", "surrogatepass") for h in heads]
    red = redact_argv(raw)
    hits.extend(red.rules)
    return [
        _cut(v, r.decode("utf-8", "surrogatepass") if r != a else h, hits)
        for v, h, a, r in zip(value, heads, raw, red.argv, strict=True)
    ]


def redact_json(value: Any, hits: list[str]) -> Any:
    """A JSON value with token-shaped secrets replaced and credential-named keys blanked.

    Strings (keys too) go through `redact_text`, a list of strings as a command line
    (`redact_argv`); under a key that `is_credential_key` flags (token, apiKey, password,
    key...) every value but null is replaced, in containers too. Strings longer than
    MAX_STRING are cut, and no cut can leave part of a secret in the record.
    """
    if isinstance(value, str):
        return _redact_str(value, hits)
    if isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            return _argv(value, hits)
        return [redact_json(v, hits) for v in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = _redact_str(str(k), hits)
            out[key] = _blank(v, hits) if is_credential_key(key) else redact_json(v, hits)
        return out
    return value
