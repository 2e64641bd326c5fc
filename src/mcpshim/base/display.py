"""Terminal-safe and JSON-safe views of bytes that came from other processes.

Everything mcpshim prints about a process (argv, cwd, paths) passes through here, so a crafted
argument can neither move the cursor, recolour the screen, reorder text (bidi controls) nor
smuggle a newline into what looks like another line of output.
"""

from __future__ import annotations

import base64
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "b64_fields",
    "dumps",
    "escape",
    "json_text",
    "quote_arg",
    "quote_argv",
    "safe",
    "unsafe_char",
]

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\x1b": "\\e", "\\": "\\\\"}


def unsafe_char(ch: str) -> bool:
    """A character the terminal views escape: a control (C0, C1), a format or bidi control,
    a line or paragraph separator, a surrogate, private-use or unassigned."""
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def _escape_str(s: str, quote: str = "", keep_backslash: bool = False) -> str:
    if s.isascii() and s.isprintable() and "\\" not in s and (not quote or quote not in s):
        return s  # the common case, without a look at each character
    out = []
    for ch in s:
        if keep_backslash and ch == "\\":
            out.append(ch)
        elif ch in _NAMED:
            out.append(_NAMED[ch])
        elif ch == quote:
            out.append("\\" + ch)
        elif "\udc80" <= ch <= "\udcff":  # an undecodable byte (surrogateescape)
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif unsafe_char(ch):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def escape(value: bytes | str) -> str:
    """Printable text: control, format and bidi characters and bad bytes become escapes."""
    return _escape_str(_text(value))


def safe(value: bytes | str) -> str:
    """Terminal-safe text that may already hold escapes (quoted argv): backslashes stay."""
    return _escape_str(_text(value), keep_backslash=True)


def quote_arg(value: bytes | str) -> str:
    """One argument as a reader would type it: bare when plain, else $'...' with escapes."""
    s = _text(value)
    if s and all(c in _SAFE for c in s):
        return s
    if all(
        not unsafe_char(c) and c not in _NAMED and c != "'" and not "\udc80" <= c <= "\udcff"
        for c in s
    ):
        return f"'{s}'"
    return "$'" + _escape_str(s, "'") + "'"


def quote_argv(args: Iterable[bytes | str]) -> str:
    return " ".join(quote_arg(a) for a in args)


def json_text(value: bytes) -> str:
    """UTF-8 text for JSON; invalid bytes show as U+FFFD (exact bytes go in a *_b64 field)."""
    return value.decode("utf-8", "replace")


_JSON_UNSAFE = re.compile(
    "[\u0080-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
    "\ud800-\udfff]"
)


def dumps(value: Any, *, indent: int | None = None) -> str:
    """JSON for a terminal: UTF-8 text kept readable, but C1 controls, bidi and other
    invisible format characters written as \\u escapes (C0 controls json escapes itself),
    and so are lone surrogates (a byte that was not UTF-8, kept by surrogateescape), which
    no UTF-8 output could hold. The result parses back to the same value.

    Indented documents (review, tree, SARIF: hundreds of KB) go through orjson at a
    thirtieth of the cost: its indent-2 text is json's, save that a float may be spelled
    otherwise (0.00001 for 1e-05, the same value). What orjson refuses (a lone surrogate,
    an int past 64 bits, a non-str key, nesting past 254, any type json would not take)
    and floats that are not finite (orjson would write null) take the json module's path."""
    text = _fast(value) if indent == 2 else None
    if text is None:
        text = json.dumps(value, ensure_ascii=False, indent=indent)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _fast(value: Any) -> str | None:
    import orjson  # here: --help prints through this module and imports click alone

    opts = orjson.OPT_INDENT_2 | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
    try:
        out = orjson.dumps(value, option=opts)
    except TypeError:  # orjson.JSONEncodeError is one
        return None
    if b"null" in out and _has_nonfinite(value):
        return None
    return out.decode()


def _has_nonfinite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_nonfinite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_nonfinite(v) for v in value)
    return False


def b64_fields(fields: Mapping[str, bytes | Iterable[bytes]]) -> dict[str, Any]:
    """The documented escape for non-UTF-8 bytes in JSON output.

    For a scalar field `name` that is not valid UTF-8, `name_b64` holds its exact bytes in
    base64; for a list field, `name_b64` maps each such item's index (as a string) to them.
    """
    out: dict[str, Any] = {}
    for name, value in fields.items():
        if isinstance(value, bytes):
            if not _valid(value):
                out[f"{name}_b64"] = base64.b64encode(value).decode()
        else:
            bad = {
                str(i): base64.b64encode(v).decode() for i, v in enumerate(value) if not _valid(v)
            }
            if bad:
                out[f"{name}_b64"] = bad
    return out


def _valid(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
