"""Output of process-derived text is safe to paste into a terminal."""

from __future__ import annotations

import subprocess

import pytest

from mcpshim.base.display import escape, quote_arg, quote_argv, safe

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


def test_json_output_escapes_invisible_and_c1_characters_and_round_trips() -> None:
    import json

    from mcpshim.base.display import dumps

    value = {"argv": ["a\u202eb", "\u009b31m", "\x1b[2J", "line\u2028sep", "é 漢字"]}
    text = dumps(value, indent=2)
    assert json.loads(text) == value
    assert all(c.isprintable() or c in "\n " for c in text)
    assert "é 漢字" in text  # readable text stays readable


def test_log_json_of_a_hostile_argument_is_terminal_safe(tmp_path: object) -> None:
    import os
    import sys
    from pathlib import Path

    root = Path(str(tmp_path))
    env = {
        **os.environ,
        "HOME": str(root),
        "XDG_DATA_HOME": str(root / "d"),
        "XDG_STATE_HOME": str(root / "s"),
    }
    mcp = [sys.executable, "-m", "mcpshim"]
    subprocess.run([*mcp, "install", "true"], env=env, check=True, capture_output=True)
    shim = root / "d" / "mcpshim" / "shims" / "true"
    subprocess.run([str(shim), "x\u202ey\u009b\x1b[31m"], env=env, check=True)
    for fmt in ("json", "ecs", "text"):
        out = subprocess.run(
            [*mcp, "log", "--format", fmt], env=env, capture_output=True, text=True, check=True
        ).stdout
        assert out and all(c.isprintable() or c == "\n" for c in out), fmt
    tree = subprocess.run(
        [*mcp, "tree", "--format", "json"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert all(c.isprintable() or c in "\n" for c in tree)


def _nested(depth: int) -> object:
    out: object = [1]
    for _ in range(depth):
        out = [out]
    return out


@pytest.mark.parametrize(
    "value",
    [
        {"argv": ["a\u202eb", "\x1b[2J", "é 漢字", "\u2028"], "n": [1, -2, True, None], "e": {}},
        {"lone": "\udcff", "x": [[], {}]},  # a surrogateescape byte: orjson refuses it
        {"big": 2**70, "small": -(2**63) - 1},  # past 64 bits
        {"nan": float("nan"), "inf": [float("-inf")]},  # orjson would write null
        {"deep": _nested(300)},  # past orjson's 254
    ],
)
def test_indented_json_is_the_json_modules_text_whichever_path_writes_it(value: object) -> None:
    """review/tree/SARIF documents go through orjson, or through json where orjson would
    refuse or change a value: the text is the same either way, and terminal-safe."""
    import json
    import math

    from mcpshim.base.display import _JSON_UNSAFE, dumps

    text = dumps(value, indent=2)
    plain = json.dumps(value, ensure_ascii=False, indent=2)
    assert text == _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", plain)
    assert all(c.isprintable() or c in "\n " for c in text)
    back = json.loads(text)
    if "nan" in back:
        assert math.isnan(back["nan"]) and back["inf"] == [float("-inf")]
    else:
        assert back == value


def test_a_dataclass_is_refused_as_json_refuses_it() -> None:
    from dataclasses import dataclass

    from mcpshim.base.display import dumps

    @dataclass(frozen=True)
    class P:
        a: int

    with pytest.raises(TypeError):
        dumps({"p": P(1)}, indent=2)
