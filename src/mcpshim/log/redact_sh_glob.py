"""Globs of the redaction table as POSIX sh source (log.redact_sh): case patterns, bracket
expressions and quoting, each character set spelt so that dash and bash read it alike."""

from __future__ import annotations

import string

from mcpshim.log.redact_rules import glob_items

__all__ = [
    "SAFE",
    "ci_glob",
    "cls_of",
    "glob_value",
    "glob_word",
    "items",
    "quote",
    "set_value",
    "set_word",
]

SAFE = set(string.ascii_letters + string.digits + "_.+/=,:@%#")

_RANGES = (string.ascii_uppercase, string.ascii_lowercase, string.digits)


def _both(c: str) -> str:
    return c.lower() + c.upper() if c.isalpha() else c


def items(glob: str, ci: bool, upper_first: bool = False) -> list[str]:
    out = [("".join(dict.fromkeys(_both(c) for c in s)) if ci else s) for s in glob_items(glob)]
    if upper_first:
        out[0] = "".join(c for c in out[0] if c.isupper())
    return out


def set_word(chars: str, negate: bool = False) -> str:
    """A bracket expression as shell source: special characters quoted one by one."""
    rest = set(chars)
    parts = []
    for rng in _RANGES:
        if set(rng) <= rest:
            parts.append(rng[0] + "-" + rng[-1])
            rest -= set(rng)
    for c in sorted(rest):
        parts.append(c if c in SAFE else ('"\'"' if c == "'" else "'" + c + "'"))
    return "[" + ("!" if negate else "") + "".join(parts) + "]"


def set_value(chars: str, negate: bool = False) -> str:
    """A bracket expression as a pattern held in a variable (no shell quoting)."""
    rest = set(chars)
    parts = []
    for rng in _RANGES:
        if set(rng) <= rest:
            parts.append(rng[0] + "-" + rng[-1])
            rest -= set(rng)
    first = "]" if "]" in rest else ""
    last = "-" if "-" in rest else ""
    mid = "".join(parts) + "".join(sorted(rest - {"]", "-"})).replace("\\", "\\\\")
    return "[" + ("!" if negate else "") + first + mid + last + "]"


def quote(text: str) -> str:
    """Always quoted (shellcheck reads `x==` and `a'b'c` as mistakes)."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def ci_glob(glob: str, ci: bool) -> str:
    """The glob with every letter also in its other case, as sets (for joining to others)."""
    if not ci:
        return glob
    return "".join(
        c if len(c) == 1 and not c.isalpha() else "[" + c + "]" for c in items(glob, True)
    )


def glob_word(glob: str, ci: bool = False, upper_first: bool = False) -> str:
    """Shell source for `glob` in a case pattern: literal runs quoted, sets bracketed."""
    out, lit = [], ""
    for chars in items(glob, ci, upper_first):
        if len(chars) == 1:
            lit += chars
            continue
        if lit:
            out.append(quote(lit) if set(lit) - SAFE else lit)
            lit = ""
        out.append(set_word(chars))
    if lit:
        out.append(quote(lit) if set(lit) - SAFE else lit)
    return "".join(out)


def glob_value(glob: str, ci: bool = False, upper_first: bool = False) -> str:
    """`glob` as a pattern to hold in a variable (for ${v#$p}, case $v in *$p)...)."""
    out = []
    for chars in items(glob, ci, upper_first):
        if len(chars) > 1:
            out.append(set_value(chars))
        elif chars in "*?[]\\":
            out.append("\\" + chars)
        else:
            out.append(chars)
    return "".join(out)


def cls_of(c: str) -> str:
    if "a" <= c <= "z":
        return "a"
    if "A" <= c <= "Z":
        return "A"
    if c.isdigit():
        return "d"
    return "s" if c in "_.-" else "o"
