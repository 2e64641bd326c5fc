"""Credential shapes, kept in one table for the shim generator and for Python writers.

The shim cannot call Python, so the same rules are rendered into POSIX sh (`sh_*` below)
and implemented here with the same algorithm, byte for byte: a test runs both on one
corpus. Only the secret part of an argument is replaced, so a composed `sh -c` line keeps
its evidence while losing its token.
"""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "MARKER_RE",
    "OPTION_NAMES",
    "TOKEN_RULES",
    "Redacted",
    "TokenRule",
    "credential_env_names",
    "is_credential_name",
    "marker",
    "redact_argv",
    "redact_joined",
    "redact_text",
    "sh_option_cases",
    "sh_option_names",
    "sh_token_calls",
    "sh_triggers",
]

_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + string.digits


@dataclass(frozen=True)
class TokenRule:
    """A secret that starts with a fixed prefix and runs over a set of characters.

    `body` lists the characters a secret may hold; `stop` (when set instead) lists the ones
    that end it. `boundary` means the prefix must not be glued to a letter or digit.
    """

    name: str
    prefixes: tuple[str, ...]
    min_len: int
    body: str = ""
    stop: str = ""
    boundary: bool = True

    def ends(self, c: int) -> bool:
        ch = chr(c)
        return ch in self.stop if self.stop else ch not in self.body

    def sh_stop_class(self) -> str:
        # Passed through a variable into ${v%%$class*}: no escapes, "-" last so it is literal.
        chars = self.stop or self.body
        chars = chars.replace("-", "") + ("-" if "-" in chars else "")
        return ("[" if self.stop else "[!") + chars + "]"


TOKEN_RULES: tuple[TokenRule, ...] = (
    TokenRule("github-token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), 30, body=_ALNUM),
    TokenRule("github-token", ("github_pat_",), 30, body=_ALNUM + "_"),
    TokenRule("api-key", ("sk-",), 20, body=_ALNUM + "_-"),
    TokenRule(
        "slack-token", ("xoxa-", "xoxb-", "xoxe-", "xoxp-", "xoxr-", "xoxs-"), 10, body=_ALNUM + "-"
    ),
    TokenRule("aws-access-key", ("AKIA", "ASIA"), 16, body=_UPPER_DIGITS),
    TokenRule("gitlab-token", ("glpat-",), 20, body=_ALNUM + "_-"),
    TokenRule("npm-token", ("npm_",), 36, body=_ALNUM),
    TokenRule("google-api-key", ("AIza",), 35, body=_ALNUM + "_-"),
    TokenRule("jwt", ("eyJ",), 30, body=_ALNUM + "_-."),
    TokenRule(
        "authorization",
        (
            "Bearer ",
            "bearer ",
            "uthorization: Basic ",
            "uthorization: token ",
            "uthorization: Token ",
        ),
        8,
        stop=" \t\n\"'",
        boundary=False,
    ),
)

#: `--name=value` keeps the name; `--name value` loses the following argument.
OPTION_NAMES: tuple[str, ...] = (
    "--password",
    "--passwd",
    "--token",
    "--api-key",
    "--api_key",
    "--apikey",
    "--secret",
    "--client-secret",
    "--access-token",
    "--auth-token",
    "--private-token",
)

_URL_STOP = b"/@ \t\"'\n"
MARKER_RE = re.compile(rb"\[REDACTED:([a-z-]+)\]")


def marker(name: str) -> bytes:
    return b"[REDACTED:" + name.encode() + b"]"


@dataclass(frozen=True)
class Redacted:
    argv: tuple[bytes, ...]
    rules: tuple[str, ...]


def _apply_token(value: bytes, prefix: bytes, rule: TokenRule, hits: list[str]) -> bytes:
    out = bytearray()
    rest = value
    while prefix in rest:
        before, _, tail = rest.partition(prefix)
        end = next((i for i, c in enumerate(tail) if rule.ends(c)), len(tail))
        token, rest = tail[:end], tail[end:]
        glued = rule.boundary and before[-1:].isalnum() and before[-1:].isascii()
        if not glued and len(token) >= rule.min_len:
            out += before + prefix + marker(rule.name)
            hits.append(rule.name)
        else:
            out += before + prefix + token
    return bytes(out + rest)


def _apply_url(value: bytes, hits: list[str]) -> bytes:
    out = bytearray()
    rest = value
    while b"://" in rest:
        before, _, tail = rest.partition(b"://")
        end = next((i for i, c in enumerate(tail) if c in _URL_STOP), len(tail))
        auth, rest = tail[:end], tail[end:]
        if rest.startswith(b"@") and b":" in auth:
            out += before + b"://" + auth.split(b":", 1)[0] + b":" + marker("url-password")
            hits.append("url-password")
        else:
            out += before + b"://" + auth
    return bytes(out + rest)


def redact_text(value: bytes, hits: list[str] | None = None) -> bytes:
    """Replace every token-shaped secret and URL password inside one string."""
    found: list[str] = [] if hits is None else hits
    for rule in TOKEN_RULES:
        for prefix in rule.prefixes:
            p = prefix.encode()
            if p in value:
                value = _apply_token(value, p, rule, found)
    if b"://" in value and b"@" in value:
        value = _apply_url(value, found)
    return value


def redact_argv(args: Sequence[bytes]) -> Redacted:
    """The arguments as the log stores them, and the names of the rules that fired."""
    hits: list[str] = []
    out: list[bytes] = []
    pending = False
    names = tuple(n.encode() for n in OPTION_NAMES)
    for arg in args:
        if pending:
            out.append(marker("option-value"))
            hits.append("option-value")
            pending = False
            continue
        if arg in names:
            pending = True
            out.append(arg)
            continue
        if any(arg.startswith(n + b"=") for n in names):
            out.append(arg.split(b"=", 1)[0] + b"=" + marker("option-value"))
            hits.append("option-value")
            continue
        out.append(redact_text(arg, hits))
    return Redacted(tuple(out), tuple(hits))


def redact_joined(value: bytes) -> tuple[bytes, tuple[str, ...]]:
    """A command line whose NUL separators were lost (the shim's view of a parent shell).

    Same steps as the shim's `_mcpshim_scrubtext`: the argument rules, then everything after
    a secret-bearing option name is dropped, since its value is glued to the name.
    """
    hits: list[str] = []
    names = tuple(n.encode() for n in OPTION_NAMES)
    eq = next((n for n in names if value.startswith(n + b"=")), None)
    if eq is not None:
        value = eq + b"=" + marker("option-value")
        hits.append("option-value")
    elif value not in names:
        value = redact_text(value, hits)
    for n in names:
        if n in value:
            value = value[: value.index(n)] + n + marker("option-value")
            hits.append("option-value")
    return value, tuple(hits)


def sh_option_names() -> str:
    return " ".join(shlex.quote(n) for n in OPTION_NAMES)


_CRED_NAME_RE = re.compile(
    r"(_TOKEN$|_KEY$|SECRET|PASSWORD|PASSWD|^AWS_|_PAT$|CREDENTIAL|^API_KEY$|_APIKEY$)", re.I
)


def is_credential_name(name: str) -> bool:
    """True for variable names that by convention hold credentials (*_TOKEN, *_KEY, ...)."""
    return bool(_CRED_NAME_RE.search(name))


def credential_env_names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(n for n in names if is_credential_name(n)))


# ---- rendering into the shim -------------------------------------------------------------


def _sh_glob_literal(s: str) -> str:
    return shlex.quote(s)


def _merge_one_position(words: list[str]) -> list[list[str]]:
    """Group same-length words that differ only at one position (ghp_/gho_ -> gh[op]_)."""
    groups: list[list[str]] = [[w] for w in dict.fromkeys(words)]
    merged = True
    while merged:
        merged = False
        for i, a in enumerate(groups):
            for j in range(i + 1, len(groups)):
                b = groups[j]
                if len(a[0]) != len(b[0]):
                    continue
                diff = [k for k in range(len(a[0])) if {w[k] for w in a} != {w[k] for w in b}]
                same_rest = all(
                    len({w[k] for w in a + b}) == 1 for k in range(len(a[0])) if k not in diff
                )
                plain = not ({w[diff[0]] for w in a + b} & set("!^[]\\")) if diff else False
                if len(diff) == 1 and same_rest and plain:
                    groups[i] = a + b
                    del groups[j]
                    merged = True
                    break
            if merged:
                break
    return groups


def _glob(group: list[str]) -> str:
    out = []
    for k in range(len(group[0])):
        chars = sorted({w[k] for w in group}, key=lambda c: (c == "-", c))  # "-" last: literal
        out.append(_sh_glob_literal(chars[0]) if len(chars) == 1 else "[" + "".join(chars) + "]")
    return "".join(out)


def sh_triggers() -> str:
    """`case` patterns that send an argument to the scrubber, checked on every argument.

    A superset of the rules, kept short because the shim parses and matches it on every exec:
    prefixes that differ in one character share a bracket, the Authorization forms share
    their stem. A false alarm only costs sourcing the library, whose exact rules decide.
    """
    prefixes = [p for r in TOKEN_RULES for p in r.prefixes if not p.startswith("uthorization")]
    pats = [f"*{_glob(g)}*" for g in _merge_one_position(prefixes)]
    pats += ["*'uthorization: '*", "*://*:*@*"]
    pats += [f"{_glob(g)}*" for g in _merge_one_position(list(OPTION_NAMES))]
    return "|".join(pats)


def sh_option_cases() -> str:
    eq = "|".join(f"{_sh_glob_literal(n)}=*" for n in OPTION_NAMES)
    bare = "|".join(_sh_glob_literal(n) for n in OPTION_NAMES)
    return (
        f"\t{eq})\n"
        "\t\t_mcpshim_r=${1%%=*}='[REDACTED:option-value]'\n"
        "\t\t_mcpshim_rr=$_mcpshim_rr,option-value\n"
        "\t\treturn\n\t\t;;\n"
        f"\t{bare})\n"
        "\t\t_mcpshim_nx=option-value\n"
        "\t\treturn\n\t\t;;"
    )


def sh_token_calls() -> str:
    lines = []
    for rule in TOKEN_RULES:
        for p in rule.prefixes:
            q = _sh_glob_literal(p)
            stop = shlex.quote(rule.sh_stop_class())
            b = "b" if rule.boundary else "-"
            lines.append(
                f"\tcase $_mcpshim_r in *{q}*) "
                f'_mcpshim_tok "$_mcpshim_r" {q} {stop} {rule.min_len} {rule.name} {b} ;; esac'
            )
    return "\n".join(lines)
