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

from mcpshim.log.redact_engine import (
    PREFILTER_RUN,
    before_ok,
    might_hold_secret,
    prefilter_len,
    redact_text,
    run_chars,
    shell_end,
)
from mcpshim.log.redact_rules import (
    AUTH_HEADERS,
    AUTH_SCHEMES,
    BARE_NEXT,
    BARE_WORDS,
    COMMANDS,
    SKIP_BARE,
    WORDS,
    CommandOptions,
)
from mcpshim.log.redactmark import MARKER_RE, marker

__all__ = [
    "MARKER_RE",
    "PREFILTER_RUN",
    "Redacted",
    "before_ok",
    "credential_env_names",
    "is_credential_key",
    "is_credential_name",
    "marker",
    "might_hold_secret",
    "prefilter_len",
    "redact_argv",
    "redact_text",
    "run_chars",
    "shell_end",
]


@dataclass(frozen=True)
class Redacted:
    argv: tuple[bytes, ...]
    rules: tuple[str, ...]


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


# ---- arguments ----------------------------------------------------------------------------

_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_.-]*")
_AWS40 = re.compile(rb"[A-Za-z0-9+/]{40}")


@functools.cache
def _groups() -> dict[bytes, CommandOptions]:
    """Each command name, the first group that names it (COMMANDS' order)."""
    out: dict[bytes, CommandOptions] = {}
    for c in COMMANDS:
        for n in c.commands:
            out.setdefault(n.encode(), c)
    return out


def _group_of(arg: bytes) -> CommandOptions | None:
    return _groups().get(arg.rsplit(b"/", 1)[-1])


def _split(value: bytes, c: CommandOptions) -> bytes:
    """An option's value as kept: with `split`, what follows its character is the secret
    (`user%PW`: `user%` stays), else all of it."""
    if not c.split:
        return marker("option-value")
    head, sep, _ = value.partition(c.split.encode())
    return head + sep + marker("option-value") if sep else value


def _scoped(arg: bytes, c: CommandOptions) -> tuple[str, bytes | None] | None:
    """(what is secret: "next" argument, the "rest", or "" for none beyond this one; the
    argument rewritten, or None) for an option of c, or None when arg is none of them."""
    letters = [x.encode() for x in c.short]
    for x in letters:
        if arg == b"-" + x:
            return "next", None
    for x in letters:
        if arg.startswith(b"-" + x) and len(arg) > 2:
            return "", b"-" + x + _split(arg[2:], c)
    for opt in (o.encode() for o in c.long):
        if arg == opt:
            return "next", None
        if arg.startswith(opt + b"="):
            return "", opt + b"=" + _split(arg[len(opt) + 1 :], c)
    flags = re.fullmatch(rb"-[A-Za-z]+", arg)
    if flags and letters and arg[-1:] in letters:
        return "next", None
    if flags and any(x.encode() in arg for x in c.rest):
        return "rest", None
    return None


_SKIP = tuple(s.encode() for s in SKIP_BARE)
_BARE_NEXT = {n.encode(): rule for n, rule in BARE_NEXT}
_BARE_WORDS = frozenset(n.encode() for n in BARE_WORDS)
#: an environment variable's name as an argument of its own (`setenv DD_API_KEY VALUE`)
_ENV_NAME = re.compile(rb"[A-Z][A-Z0-9_]*_[A-Z0-9_]*")
_SCHEMES = "|".join(AUTH_SCHEMES)
_AUTH = re.compile(f"(?i)(?:{'|'.join(AUTH_HEADERS)}):( ?(?:{_SCHEMES}))? ?".encode())
_SCHEME = re.compile(f"(?i)(?:{_SCHEMES})".encode())
_PEM_BEGIN, _PEM_OPEN, _PEM_END = b"-----BEGIN", b"KEY-----", b"-----END"


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
    if (rule := _BARE_NEXT.get(arg.lower())) is not None:
        return rule, None
    name, eq, _ = arg.partition(b"=")
    if eq and _NAME.fullmatch(name) and is_credential_name(name):
        return "credential-name", name + b"=" + marker("credential-name")
    if _AWS40.fullmatch(arg) and all(re.search(p, arg) for p in (rb"[A-Z]", rb"[a-z]", rb"[0-9]")):
        return "aws-secret-key", marker("aws-secret-key")
    return None


def _soft(arg: bytes, after_option: bool) -> str:
    """An argument after which the next one is the secret unless it is an option: a bare
    `password` (a `.netrc` line as words), an environment variable's name, an HTTP
    authorization header with no value (the value next; "scheme" when the scheme comes
    first: `"Authorization:" "Bearer" TOKEN`). "" for none. A variable's name after an
    option is that option's (`docker run -e GITHUB_TOKEN IMAGE`, `env -u NAME CMD`)."""
    if arg.lower() in _BARE_WORDS:
        return "credential-name"
    if not after_option and _ENV_NAME.fullmatch(arg) and is_credential_name(arg):
        return "credential-name"
    m = _AUTH.fullmatch(arg)
    if m:
        return "authorization" if m.group(1) else "scheme"
    return ""


class _Args:
    """The state redact_argv carries from one argument to the next."""

    def __init__(self, scope: CommandOptions | None) -> None:
        self.pending = ""  # the next argument is the secret (this rule's)
        self.soft = ""  # ... unless it is an option (_soft)
        self.split = False  # the next is an option's value, secret after its split character
        self.rest = ""  # every argument from here on is (`htpasswd -b`; a PEM key's words)
        self.private = False  # the last argument was `PRIVATE` (of `... PRIVATE KEY-----`)
        self.begun = False  # a `-----BEGIN` came, and no key's words after it yet
        self.option = False  # the last argument was an option (`-e NAME`: NAME is no setter's)
        self.scope = scope  # the command whose own options count
        self.armed = scope is not None and not scope.sub  # its subcommand came (or needs none)


#: an argv redacted once is not redacted again (the tracer redacts each exec as it is
#: parsed, and its records at the session's end): argvs up to this size are remembered,
#: 2,048 of them (at most 16 MiB with their redacted copies; a longer one is redone)
_MEMO_BYTES = 4096


def redact_argv(args: Sequence[bytes], command: bytes | str | None = None) -> Redacted:
    """The arguments as the log stores them, and the names of the rules that fired.
    `command` is the program they were given to, when it is not args[0] (a shim's record).
    A secret may span arguments: an option's value, a PEM key given as words (`$(cat key)`
    unquoted), an authorization header whose value is the next word."""
    key = tuple(args)
    if command is None and sum(map(len, key)) <= _MEMO_BYTES:
        return _remembered(key)
    return _redact_argv(key, command)


@functools.lru_cache(maxsize=2048)
def _remembered(args: tuple[bytes, ...]) -> Redacted:
    return _redact_argv(args, None)


def _redact_argv(args: tuple[bytes, ...], command: bytes | str | None) -> Redacted:
    hits: list[str] = []
    out: list[bytes] = []
    cmd = command.encode() if isinstance(command, str) else command
    st = _Args(_group_of(cmd) if cmd else None)
    for arg in args:
        out.append(_one(arg, st, hits))
    return Redacted(tuple(out), tuple(hits))


def _secret(rule: str, hits: list[str]) -> bytes:
    hits.append(rule)
    return marker(rule)


def _one(arg: bytes, st: _Args, hits: list[str]) -> bytes:
    """One argument as kept (the rules that fired added to `hits`)."""
    private, st.private = st.private, arg == b"PRIVATE"
    after_option, st.option = st.option, arg.startswith(b"-")
    st.begun = st.begun or arg.startswith(_PEM_BEGIN)
    if st.rest:
        if st.rest == "private-key" and arg.startswith(_PEM_END):
            st.rest = ""  # the key's last words: `-----END RSA PRIVATE KEY-----`
            return arg
        return _secret(st.rest, hits)
    if st.pending:
        rule, st.pending = st.pending, ""
        return _secret(rule, hits)
    if st.split:
        st.split = False
        assert st.scope is not None
        new = _split(arg, st.scope)
        if new != arg:
            hits.append("option-value")
        return new
    if st.soft:
        soft, st.soft = st.soft, ""
        if not arg.startswith(b"-"):
            if soft == "scheme" and _SCHEME.fullmatch(arg):
                st.soft = "authorization"  # `"Authorization:" "Bearer" TOKEN`
                return arg
            return _secret("authorization" if soft == "scheme" else soft, hits)
    if private and st.begun and arg == _PEM_OPEN:  # `-----BEGIN RSA PRIVATE KEY-----`
        st.rest, st.begun = "private-key", False
        return arg
    group = _group_of(arg)
    if group is not None:
        st.scope, st.armed = group, not group.sub
        return arg
    if st.scope is not None and not st.armed:
        st.armed = arg in {w.encode() for w in st.scope.sub}
        if st.armed:
            return arg
    elif st.scope is not None:
        hit = _scoped(arg, st.scope)
        if hit is not None:
            what, rewritten = hit
            st.pending = "option-value" if what == "next" and not st.scope.split else ""
            st.split = what == "next" and bool(st.scope.split)
            st.rest = "option-value" if what == "rest" else ""
            if rewritten is None:
                return arg
            if rewritten != arg:
                hits.append("option-value")
            return rewritten
        if st.scope.operand and not arg.startswith(b"-") and b"=" not in arg:
            st.scope = None  # `vault login TOKEN` (not `vault login -method=x username=u`)
            return _secret("option-value", hits)
        if st.scope.operands_end and not arg.startswith(b"-"):
            st.scope = None
    st.soft = _soft(arg, after_option)
    if st.soft:
        return arg
    whole = _whole(arg)
    if whole is None:
        return redact_text(arg, hits)
    if whole[1] is None:
        st.pending = whole[0]
        return arg
    hits.append(whole[0])
    return whole[1]
