"""Reading a TOML file a person wrote (policy, baseline): every failure names the file, the
line and the key, never a traceback.

A UTF-8 byte order mark at the start (Windows editors write one) is no part of the
document: TOML forbids it, but the JSON configs beside these files are read with one, and
both are read alike (`without_bom`).

tomllib reports syntax errors with a line, but 5,000 levels of nesting end in its
RecursionError and a 5,000-digit integer in int()'s ValueError; both are found here and
said plainly, with the line they start on.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mcpshim.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["Keys", "parse_toml", "without_bom"]

_LONG_NUMBER = re.compile(r"[0-9_]{4000,}")
_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _deep_line(text: str) -> int:
    """The line where brackets first nest 100 deep (strings not told apart: a guide)."""
    depth = 0
    for i, ch in enumerate(text):
        depth += ch in "[{"
        depth -= ch in "]}"
        if depth >= 100:
            return text.count("\n", 0, i) + 1
    return 1


def without_bom(text: str) -> str:
    """The text without the byte order mark an editor may have put first."""
    return text.removeprefix("\ufeff")


def parse_toml(text: str, path: Path, what: str) -> dict[str, Any]:
    """The document, or an InputError `FILE:LINE: ...` naming `what` the file is."""
    text = without_bom(text)
    try:
        data: dict[str, Any] = tomllib.loads(text)
        return data
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = m.group(1) if m else str(max(1, text.count("\n")))
        raise InputError(f"{path}:{line}: not valid TOML: {exc}") from None
    except RecursionError:
        line = _deep_line(text)
        raise InputError(f"{path}:{line}: {what} nested too deeply to read") from None
    except ValueError as exc:  # int() refuses more than 4,300 digits
        m = _LONG_NUMBER.search(text)
        line = text.count("\n", 0, m.start()) + 1 if m else 1
        raise InputError(f"{path}:{line}: {what} holds a number too long to read ({exc})") from None


class Keys:
    """Where a key path sits in the file, so an error names the file, the line and the key:
    `FILE:LINE: <what> key <path>: <problem>`."""

    def __init__(self, path: Path, text: str, what: str) -> None:
        self.path = path
        self.what = what
        self.lines = without_bom(text).splitlines()

    def line_of(self, keypath: str) -> int | None:
        parts = keypath.split(".")
        leaf = parts[-1].split("[")[0]
        table = parts[:-1]
        current: list[str] = []
        key_re = re.compile(rf"^\s*(\"?){re.escape(leaf)}\1\s*=")
        fallback = None
        for i, line in enumerate(self.lines, 1):
            m = _HEADER.match(line)
            if m:
                current = [p.strip().strip('"') for p in m.group(1).split(".")]
                if current == parts:
                    return i
                continue
            if key_re.match(line):
                if current == table:
                    return i
                fallback = fallback or i
        return fallback

    def fail(self, keypath: str, problem: str) -> InputError:
        line = self.line_of(keypath) if keypath else None
        where = f"{self.path}:{line}" if line else str(self.path)
        return InputError(f"{where}: {self.what} key {keypath or '(top level)'}: {problem}")

    def no_unknown(self, table: Mapping[str, Any], known: Iterable[str], prefix: str) -> None:
        allowed = set(known)
        for key in table:
            if key not in allowed:
                raise self.fail(
                    f"{prefix}{key}", f"unknown key (expected one of: {', '.join(sorted(allowed))})"
                )
