"""The text rules of redaction (log.redact_rules) applied to one string: a quick superset
check (the needles), then each rule in the table's order, each skipped without a pattern
when the text cannot hold its match (log.redact_match: its patterns compile the first time
one may). log.redact builds the argv rules on it; the shims' sh follows the same algorithm
(log.redact_sh)."""

from __future__ import annotations

import functools
import re

from mcpshim.log.redact_match import (
    PREFILTER_RUN,
    Rule,
    char_class,
    prefilter_len,
    quick,
    run_chars,
)
from mcpshim.log.redact_rules import MAX_SPECIALS, RULES, URL_STOP, Before
from mcpshim.log.redactmark import marker

__all__ = [
    "PREFILTER_RUN",
    "before_ok",
    "might_hold_secret",
    "prefilter_len",
    "redact_text",
    "run_chars",
    "shell_end",
]

_ALNUM = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_SEP = frozenset(b"_.-")


def before_ok(text: bytes, start: int, before: Before) -> bool:
    """Whether what precedes text[start:] lets a head or a name word start there."""
    if before == "any":
        return True
    if start == 0:
        return before == "word"
    c = text[start - 1]
    if before == "word":
        return c not in _ALNUM
    return c in _SEP or (97 <= c <= 122 and 65 <= text[start] <= 90)


# ---- text rules ---------------------------------------------------------------------------


_SQ, _DQ, _BS, _DOLLAR = b"'"[0], b'"'[0], b"\\"[0], b"$"[0]


def shell_end(value: bytes, s: int, stops: frozenset[int]) -> int:
    """Where a shell word starting at value[s] ends: at the first of `stops` outside quotes.
    `'...'` holds anything; `"..."` and `$'...'` end at their quote unless a backslash
    escapes it; a backslash outside quotes escapes the next character. Past MAX_SPECIALS
    quotes and backslashes, or in a quote never closed, it runs to the end of the text.
    (The shims' _mcpshim_sw takes the same steps.)"""
    n, i, state, specials, plain = len(value), s, 0, 0, s  # state: 0 out, ' " or $ in
    while i < n:
        c = value[i]
        if state == 0:
            if c in stops:
                return i
            if c in (_SQ, _DQ, _BS):
                specials += 1
                if specials > MAX_SPECIALS:
                    return n
                if c == _BS:
                    i += 2
                    plain = i
                    continue
                dollar = c == _SQ and i > plain and value[i - 1] == _DOLLAR
                state = _DOLLAR if dollar else c
        elif state == _SQ:
            if c == _SQ:
                specials += 1
                if specials > MAX_SPECIALS:
                    return n
                state, plain = 0, i + 1
        elif c in (_BS, _DQ if state == _DQ else _SQ):
            specials += 1
            if specials > MAX_SPECIALS:
                return n
            if c == _BS:
                i += 2
                continue
            state, plain = 0, i + 1
        i += 1
    return n


@functools.cache
def _compiled() -> tuple[Rule | str, ...]:
    """The table, built on the first value that might hold a secret (a reader of the log
    never needs it); each rule's patterns on the first value that might hold its match."""
    return tuple(r if isinstance(r, str) else Rule(r) for r in RULES)


def _apply(value: bytes, low: bytes, rule: Rule, hits: list[str]) -> bytes:
    """One rule over value, left to right: at each anchor with a head before it (starting
    after the last run) and a tail after it, the run that follows is the secret when it is
    long enough. A run too short is kept, and no head may start inside it."""
    if rule.cannot_match(value, low):
        return value
    c = rule.parts
    if not c.pre.search(value):
        return value
    out: list[bytes] = []
    emit = floor = 0
    fired = False
    m = c.occ.search(value)
    while m:
        i = value.index(rule.anchor, m.start())
        ok = any(
            i - n >= floor and rx.fullmatch(value, i - n, i) and before_ok(value, i - n, b)
            for rx, n, b in c.heads
        )
        if not ok:
            m = c.occ.search(value, i + 1)
            continue
        tail = next(t for t in c.tails if t.match(value, i + 1))
        s = tail.match(value, i + 1).end()  # type: ignore[union-attr]
        word = rule.rule.sh_word
        e = shell_end(value, s, c.stops) if word else c.run.match(value, s).end()  # type: ignore[union-attr]
        if e > s and value[s] in c.not_first:
            e = s
        if e - s >= rule.rule.min_len:
            out += (value[emit:s], marker(rule.rule.name))
            emit = e
            fired = True
        floor = e
        m = c.occ.search(value, e)
    if not fired:
        return value
    hits.append(rule.rule.name)
    out.append(value[emit:])
    return b"".join(out)


_URL_WORD = re.compile(char_class(URL_STOP, negate=True) + b"*")
_PORT = re.compile(rb"[0-9]+/")


def _apply_url(value: bytes, hits: list[str]) -> bytes:
    """`scheme://W`, W running to a blank or a quote: when W holds `:` and, after it, `@`,
    everything from the first `:` to the last `@` is the password (`@` and `/` in a password
    included), unless digits and `/` follow that `:` (a port: https://host:8443/a@b)."""
    if b"://" not in value or b"@" not in value:
        return value
    out: list[bytes] = []
    emit = pos = 0
    i = value.find(b"://")
    while i != -1:
        s = i + 3
        e = _URL_WORD.match(value, s).end()  # type: ignore[union-attr]
        w = value[s:e]
        k, a = w.find(b":"), w.rfind(b"@")
        if k != -1 and a > k and not _PORT.match(w, k + 1):
            out += (value[emit : s + k + 1], marker("url-password"))
            emit = s + a
        pos = max(e, i + 1)
        i = value.find(b"://", pos)
    if not out:
        return value
    hits.append("url-password")
    out.append(value[emit:])
    return b"".join(out)


def might_hold_secret(value: bytes) -> bool:
    """A quick superset of the rules: False means redact_text would change nothing."""
    if b"://" in value and b"@" in value:
        return True
    any_needle, hard = quick()
    if any_needle.search(value.lower()):
        return True
    return bool(hard is not None and hard.search(value))


def redact_text(value: bytes, hits: list[str] | None = None) -> bytes:
    """Replace every token-shaped secret, credential value and URL password inside a string."""
    found: list[str] = [] if hits is None else hits
    if not might_hold_secret(value):
        return value
    low = value.lower()
    for c in _compiled():
        new = _apply_url(value, found) if isinstance(c, str) else _apply(value, low, c, found)
        if new is not value:
            value, low = new, new.lower()
    return value
