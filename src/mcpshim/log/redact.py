"""Credentials out of everything mcpshim writes, by the one table in redact_rules.

The shim cannot call Python, so the same rules are rendered into POSIX sh (redact_sh); the
sh follows the algorithm written here (in linear time: see redact_sh) and a corpus test
holds both to the same bytes. Only the secret part of an argument is replaced, so a
composed `sh -c` line keeps its evidence while losing its token.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mcpshim.log.redact_rules import (
    BARE_NEXT,
    COMMANDS,
    MAX_SPECIALS,
    RULES,
    SHELL_OPEN,
    SKIP_BARE,
    URL_STOP,
    WORDS,
    Before,
    CommandOptions,
    TextRule,
    glob_items,
)
from mcpshim.log.redactmark import MARKER_RE, marker

__all__ = [
    "MARKER_RE",
    "NEEDLES",
    "PREFILTER_RUN",
    "Redacted",
    "before_ok",
    "credential_env_names",
    "is_credential_key",
    "is_credential_name",
    "marker",
    "might_hold_secret",
    "redact_argv",
    "redact_text",
    "run_chars",
    "shell_end",
]

_ALNUM = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_SEP = frozenset(b"_.-")
PREFILTER_RUN = 3  # run characters a rule's quick check asks for (it is a superset)


@dataclass(frozen=True)
class Redacted:
    argv: tuple[bytes, ...]
    rules: tuple[str, ...]


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


def is_credential_name(name: str | bytes) -> bool:
    """True for names that end with a credential word: GITHUB_TOKEN, db_password, apiKey,
    AWS_SECRET_ACCESS_KEY; False for AWS_CA_BUNDLE, PASSWORD_FILE, tokenizer, key."""
    raw = name if isinstance(name, bytes) else name.encode("utf-8", "surrogateescape")
    low = raw.lower()
    for w in WORDS:
        word = w.word.encode()
        if low.endswith(word) and before_ok(raw, len(raw) - len(word), w.before):
            return True
    return False


@functools.lru_cache(maxsize=4096)
def is_credential_key(key: str) -> bool:
    """A JSON object key whose value is a credential: a credential name, or plain `key`.
    (Cached: a listing's schemas repeat the same few keys thousands of times.)"""
    return is_credential_name(key) or key.lower() == "key"


def credential_env_names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(n for n in names if is_credential_name(n)))


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


# ---- arguments ----------------------------------------------------------------------------

_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_.-]*")
_AWS40 = re.compile(rb"[A-Za-z0-9+/]{40}")


def _group_of(arg: bytes) -> CommandOptions | None:
    base = arg.rsplit(b"/", 1)[-1]
    return next((c for c in COMMANDS if base in {n.encode() for n in c.commands}), None)


def _scoped(arg: bytes, c: CommandOptions) -> tuple[str, bytes | None] | None:
    """(what is secret: "next" argument, the "rest", or "" for none beyond this one; the
    argument rewritten, or None) for an option of c, or None when arg is none of them."""
    letters = [x.encode() for x in c.short]
    for x in letters:
        if arg == b"-" + x:
            return "next", None
    for x in letters:
        if arg.startswith(b"-" + x) and len(arg) > 2:
            return "", b"-" + x + marker("option-value")
    for opt in (o.encode() for o in c.long):
        if arg == opt:
            return "next", None
        if arg.startswith(opt + b"="):
            return "", opt + b"=" + marker("option-value")
    flags = re.fullmatch(rb"-[A-Za-z]+", arg)
    if flags and letters and arg[-1:] in letters:
        return "next", None
    if flags and any(x.encode() in arg for x in c.rest):
        return "rest", None
    return None


_SKIP = tuple(s.encode() for s in SKIP_BARE)
_BARE_NEXT = frozenset(n.encode() for n in BARE_NEXT)


def _whole(arg: bytes) -> tuple[str, bytes | None] | None:
    """Rules on a whole argument: (the rule, the argument rewritten, or None when the
    secret is the next argument), or None when none applies."""
    if arg.startswith(b"--"):
        name, eq, _ = arg[2:].partition(b"=")
        if eq and is_credential_name(name):
            return "option-value", b"--" + name + b"=" + marker("option-value")
        if not eq and is_credential_name(name) and not name.lower().startswith(_SKIP):
            return "option-value", None
        return None
    if arg.lower() in _BARE_NEXT:
        return "aws-secret-key", None
    name, eq, _ = arg.partition(b"=")
    if eq and _NAME.fullmatch(name) and is_credential_name(name):
        return "credential-name", name + b"=" + marker("credential-name")
    if _AWS40.fullmatch(arg) and all(re.search(p, arg) for p in (rb"[A-Z]", rb"[a-z]", rb"[0-9]")):
        return "aws-secret-key", marker("aws-secret-key")
    return None


def redact_argv(args: Sequence[bytes], command: bytes | str | None = None) -> Redacted:
    """The arguments as the log stores them, and the names of the rules that fired.
    `command` is the program they were given to, when it is not args[0] (a shim's record)."""
    hits: list[str] = []
    out: list[bytes] = []
    pending: str | None = None
    rest = False  # every argument from here on is secret (`htpasswd -b`)
    cmd = command.encode() if isinstance(command, str) else command
    scope = _group_of(cmd) if cmd else None
    for arg in args:
        if pending or rest:
            out.append(marker(pending or "option-value"))
            hits.append(pending or "option-value")
            pending = None
            continue
        group = _group_of(arg)
        if group is not None:
            scope = group
            out.append(arg)
            continue
        if scope is not None:
            hit = _scoped(arg, scope)
            if hit is not None:
                what, new = hit
                pending = "option-value" if what == "next" else None
                rest = what == "rest"
                if new is not None:
                    hits.append("option-value")
                out.append(arg if new is None else new)
                continue
            if scope.operands_end and not arg.startswith(b"-"):
                scope = None
        whole = _whole(arg)
        if whole is None:
            out.append(redact_text(arg, hits))
        elif whole[1] is None:
            pending = whole[0]
            out.append(arg)
        else:
            hits.append(whole[0])
            out.append(whole[1])
    return Redacted(tuple(out), tuple(hits))
