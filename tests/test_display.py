"""Output of process-derived text is safe to paste into a terminal."""

from __future__ import annotations

import subprocess

import pytest

from mcpshim.display import escape, quote_arg, quote_argv, safe

HOSTILE = [b"\x1b]0;title\x07", b"\x1b[2J", "\u202eevil".encode(), b"a\rb", b"\x9b31m", b"\xff"]


@pytest.mark.parametrize("value", HOSTILE)
def test_no_control_or_bidi_character_survives(value: bytes) -> None:
    for out in (escape(value), safe(value), quote_arg(value)):
        assert out.isprintable(), out
        assert "\u202e" not in out


def test_quoted_argv_pastes_back_into_bash_as_the_same_bytes() -> None:
    args = [b"plain", b"two words", b"it's", b"line\nbreak\x1b", b"back\\slash", b"\xff\xfe"]
    line = quote_argv(args)
    out = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {line}"], capture_output=True, check=True
    ).stdout
    assert out.split(b"\0")[:-1] == args


def test_safe_keeps_existing_escapes_and_escape_marks_backslashes() -> None:
    assert safe("$'a\\nb'") == "$'a\\nb'"
    assert escape("a\\nb") == "a\\\\nb"
    assert safe("x\ny") == "x\\ny"
