"""Credentials out of everything mcpshim writes, by the one table in redact_rules.

The shim cannot call Python, so the same rules are rendered into POSIX sh (redact_sh); the
sh follows the algorithm written here (in linear time: see redact_sh) and a corpus test
holds both to the same bytes. Only the secret part of an argument is replaced, so a
composed `sh -c` line keeps its evidence while losing its token.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mcpshim.log.redact_rules import (
    BARE_NEXT,
    COMMANDS,
    JOINED_OPTION_NAMES,
    RULES,
    SKIP_BARE,
    URL_STOP,
    WORDS,
    Before,
    CommandOptions,
    TextRule,
    glob_items,
)

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
    "redact_joined",
    "redact_text",
]

MARKER_RE = re.compile(rb"\[REDACTED:([a-z0-9-]+)\]")
_ALNUM = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_SEP = frozenset(b"_.-")
PREFILTER_RUN = 3  # run characters a rule's quick check asks for (it is a superset)


def marker(name: str) -> bytes:
    return b"[REDACTED:" + name.encode() + b"]"


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


def is_credential_key(key: str) -> bool:
    """A JSON object key whose value is a credential: a credential name, or plain `key`."""
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


def _compile(r: TextRule) -> _Rule:
    ci = rb"(?i:%s)" if r.ci else b"(?:%s)"
    heads = ci % b"|".join(_rx(h.glob) for h in r.heads)
    tails = ci % b"|".join(_rx(t) for t in r.tails)
    run_cls = _cls(r.body or r.stop, negate=not r.body)
    occ = heads + re.escape(r.anchor.encode()) + tails
    flags = re.IGNORECASE if r.ci else 0
    return _Rule(
        r,
        r.anchor.encode(),
        re.compile(occ),
        re.compile(occ + run_cls + b"{%d}" % min(r.min_len, PREFILTER_RUN)),
        tuple((re.compile(_rx(h.glob), flags), len(glob_items(h.glob)), h.before) for h in r.heads),
        tuple(re.compile(_rx(t), flags) for t in r.tails),
        re.compile(run_cls + b"*"),
        r.not_first.encode(),
        tuple(w.encode() for w in r.scope),
    )


_COMPILED: tuple[_Rule | str, ...] = tuple(r if isinstance(r, str) else _compile(r) for r in RULES)


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
        e = c.run.match(value, s).end()  # type: ignore[union-attr]
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


def _needles() -> tuple[bytes, ...]:
    """Lower-case text one of which every rule's match holds (checked on value.lower())."""
    out = {"token", "pass", "secret", "key", "bearer", "auth", "pwd", "pat"}
    for r in RULES:
        if isinstance(r, TextRule) and r.min_len > 1:  # the token shapes
            for h in r.heads:
                for t in r.tails:
                    out.update(_expand(h.glob + r.anchor + t))
        if isinstance(r, TextRule):
            out.update(r.scope)
    return tuple(sorted(n.lower().encode() for n in out))


def _expand(glob: str) -> list[str]:
    words = [""]
    for chars in glob_items(glob):
        words = [w + c for w in words for c in chars]
    return words


NEEDLES = _needles()


def might_hold_secret(value: bytes) -> bool:
    """A quick superset of the rules: False means redact_text would change nothing."""
    if b"://" in value and b"@" in value:
        return True
    low = value.lower()
    return any(n in low for n in NEEDLES)


def redact_text(value: bytes, hits: list[str] | None = None) -> bytes:
    """Replace every token-shaped secret, credential value and URL password inside a string."""
    found: list[str] = [] if hits is None else hits
    if not might_hold_secret(value):
        return value
    for c in _COMPILED:
        value = _apply_url(value, found) if isinstance(c, str) else _apply(value, c, found)
    return value


# ---- arguments ----------------------------------------------------------------------------

_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_.-]*")
_AWS40 = re.compile(rb"[A-Za-z0-9+/]{40}")


def _group_of(arg: bytes) -> CommandOptions | None:
    base = arg.rsplit(b"/", 1)[-1]
    return next((c for c in COMMANDS if base in {n.encode() for n in c.commands}), None)


def _scoped(arg: bytes, c: CommandOptions) -> tuple[bool, bytes | None] | None:
    """(the next argument is the secret, the argument rewritten) for an option of c."""
    letters = [x.encode() for x in c.short]
    for x in letters:
        if arg == b"-" + x:
            return True, None
    for x in letters:
        if arg.startswith(b"-" + x) and len(arg) > 2:
            return False, b"-" + x + marker("option-value")
    for opt in (o.encode() for o in c.long):
        if arg == opt:
            return True, None
        if arg.startswith(opt + b"="):
            return False, opt + b"=" + marker("option-value")
    if re.fullmatch(rb"-[A-Za-z]+[" + b"".join(letters) + rb"]", arg):
        return True, None
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
    cmd = command.encode() if isinstance(command, str) else command
    scope = _group_of(cmd) if cmd else None
    for arg in args:
        if pending:
            out.append(marker(pending))
            hits.append(pending)
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
                nxt, new = hit
                pending = "option-value" if nxt else None
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


def redact_joined(value: bytes) -> tuple[bytes, tuple[str, ...]]:
    """A command line whose NUL separators were lost (the shim's view of a parent shell).

    Same steps as the shim's `_mcpshim_scrubtext`: the text rules, then everything after
    a secret-bearing option name is dropped, since its value may be glued to the name.
    """
    hits: list[str] = []
    value = redact_text(value, hits)
    for n in (n.encode() for n in JOINED_OPTION_NAMES):
        if n in value:
            value = value[: value.index(n)] + n + marker("option-value")
            hits.append("option-value")
    return value, tuple(hits)
