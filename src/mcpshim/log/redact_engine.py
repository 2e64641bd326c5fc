"""The text rules of redaction (log.redact_rules) applied to one string: a quick superset
check (the needles), then each rule in the table's order. log.redact builds the argv rules on
it; the shims' sh follows the same algorithm (log.redact_sh)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from mcpshim.log.redact_rules import (
    MAX_SPECIALS,
    RULES,
    SHELL_OPEN,
    URL_STOP,
    Before,
    TextRule,
    glob_items,
)
from mcpshim.log.redactmark import marker

__all__ = [
    "NEEDLES",
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
PREFILTER_RUN = 3  # run characters a rule's quick check asks for (it is a superset)


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


def _rx(glob: str) -> bytes:
    out = []
    for chars in glob_items(glob):
        out.append(
            re.escape(chars) if len(chars) == 1 else "[" + "".join(map(re.escape, chars)) + "]"
        )
    return "".join(out).encode()


def _cls(chars: str, negate: bool) -> bytes:
    return ("[" + ("^" if negate else "") + "".join(map(re.escape, chars)) + "]").encode()


@dataclass(frozen=True)
class _Rule:
    rule: TextRule
    anchor: bytes
    occ: re.Pattern[bytes]  # a head, the anchor, a tail
    pre: re.Pattern[bytes]  # ... and the start of a long enough run: without it, no hit
    heads: tuple[tuple[re.Pattern[bytes], int, Before], ...]
    tails: tuple[re.Pattern[bytes], ...]
    run: re.Pattern[bytes]
    not_first: bytes
    scope: tuple[bytes, ...]
    stops: frozenset[int]  # a shell word's stops outside quotes (rule.sh_word)


def run_chars(r: TextRule) -> tuple[str, bool]:
    """(characters, negated): what a run's first characters may be. A shell word may start
    with a quote, which is a stop of the plain run (and may hold anything after it, so only
    its first character is known: see PREFILTER_RUN's use)."""
    if r.body:
        return r.body, False
    if r.sh_word:
        return "".join(c for c in r.stop if c not in SHELL_OPEN), True
    return r.stop, True


def prefilter_len(r: TextRule) -> int:
    """How many run characters a rule's quick check asks for."""
    return 1 if r.sh_word else min(r.min_len, PREFILTER_RUN)


def _compile(r: TextRule) -> _Rule:
    ci = rb"(?i:%s)" if r.ci else b"(?:%s)"
    heads = ci % b"|".join(_rx(h.glob) for h in r.heads)
    tails = ci % b"|".join(_rx(t) for t in r.tails)
    run_cls = _cls(r.body or r.stop, negate=not r.body)
    chars, negated = run_chars(r)
    occ = heads + re.escape(r.anchor.encode()) + tails
    flags = re.IGNORECASE if r.ci else 0
    return _Rule(
        r,
        r.anchor.encode(),
        re.compile(occ),
        re.compile(occ + _cls(chars, negated) + b"{%d}" % prefilter_len(r)),
        tuple((re.compile(_rx(h.glob), flags), len(glob_items(h.glob)), h.before) for h in r.heads),
        tuple(re.compile(_rx(t), flags) for t in r.tails),
        re.compile(run_cls + b"*"),
        r.not_first.encode(),
        tuple(w.encode() for w in r.scope),
        frozenset(chars.encode()) if r.sh_word else frozenset(),
    )


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
def _compiled() -> tuple[_Rule | str, ...]:
    """The table's patterns, built on the first value that might hold a secret: some 50 ms
    of `re.compile` that a reader of the log (review, tree, sessions) never needs."""
    return tuple(r if isinstance(r, str) else _compile(r) for r in RULES)


def _apply(value: bytes, c: _Rule, hits: list[str]) -> bytes:
    """One rule over value, left to right: at each anchor with a head before it (starting
    after the last run) and a tail after it, the run that follows is the secret when it is
    long enough. A run too short is kept, and no head may start inside it."""
    if c.scope and not any(w in value for w in c.scope):
        return value
    if not c.pre.search(value):
        return value
    out: list[bytes] = []
    emit = floor = 0
    fired = False
    m = c.occ.search(value)
    while m:
        i = value.index(c.anchor, m.start())
        ok = any(
            i - n >= floor and rx.fullmatch(value, i - n, i) and before_ok(value, i - n, b)
            for rx, n, b in c.heads
        )
        if not ok:
            m = c.occ.search(value, i + 1)
            continue
        tail = next(t for t in c.tails if t.match(value, i + 1))
        s = tail.match(value, i + 1).end()  # type: ignore[union-attr]
        word = c.rule.sh_word
        e = shell_end(value, s, c.stops) if word else c.run.match(value, s).end()  # type: ignore[union-attr]
        if e > s and value[s] in c.not_first:
            e = s
        if e - s >= c.rule.min_len:
            out += (value[emit:s], marker(c.rule.name))
            emit = e
            fired = True
        floor = e
        m = c.occ.search(value, e)
    if not fired:
        return value
    hits.append(c.rule.name)
    out.append(value[emit:])
    return b"".join(out)


_URL_WORD = re.compile(_cls(URL_STOP, negate=True) + b"*")
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


_EXPAND_MAX = 64  # a head with more spellings than this is looked for by a pattern


def _needles() -> tuple[tuple[bytes, ...], re.Pattern[bytes] | None]:
    """Lower-case text one of which every rule's match holds (checked on value.lower()),
    and a pattern for the shapes with too many spellings to list (a discord token's head)."""
    out = {"token", "pass", "secret", "key", "bearer", "auth", "pwd", "pat", "cookie"}
    hard: list[bytes] = []
    for r in RULES:
        if isinstance(r, TextRule) and (r.body or r.min_len > 1):  # the token shapes
            for h in r.heads:
                for t in r.tails:
                    glob = h.glob + r.anchor + t
                    if _spellings(glob) <= _EXPAND_MAX:
                        out.update(_expand(glob))
                    else:
                        hard.append(_rx(glob))
        if isinstance(r, TextRule):
            out.update(r.scope)
    pattern = re.compile(b"|".join(hard)) if hard else None
    return tuple(sorted(n.lower().encode() for n in out)), pattern


def _spellings(glob: str) -> int:
    n = 1
    for chars in glob_items(glob):
        n *= len(chars)
    return n


def _expand(glob: str) -> list[str]:
    words = [""]
    for chars in glob_items(glob):
        words = [w + c for w in words for c in chars]
    return words


def _trie(words: tuple[bytes, ...]) -> re.Pattern[bytes]:
    """One pattern that finds any of `words`, as a trie: one pass over a value instead of
    one search per word (a listing of 100,000 tools spent 14 s in 158 searches each)."""
    root: dict[bytes, Any] = {}
    for w in words:
        node = root
        for c in w:
            node = node.setdefault(bytes([c]), {})
        node[b""] = {}

    def rx(node: dict[bytes, Any]) -> bytes:
        alts = [re.escape(k) + rx(v) for k, v in sorted(node.items()) if k]
        if not alts:
            return b""
        body = alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"
        return b"(?:" + body + b")?" if b"" in node else body

    return re.compile(rx(root))


NEEDLES, _HARD = _needles()
_ANY_NEEDLE = _trie(NEEDLES)


def might_hold_secret(value: bytes) -> bool:
    """A quick superset of the rules: False means redact_text would change nothing."""
    if b"://" in value and b"@" in value:
        return True
    return bool(_ANY_NEEDLE.search(value.lower())) or bool(
        _HARD is not None and _HARD.search(value)
    )


def redact_text(value: bytes, hits: list[str] | None = None) -> bytes:
    """Replace every token-shaped secret, credential value and URL password inside a string."""
    found: list[str] = [] if hits is None else hits
    if not might_hold_secret(value):
        return value
    for c in _compiled():
        value = _apply_url(value, found) if isinstance(c, str) else _apply(value, c, found)
    return value
