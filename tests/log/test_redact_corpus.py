"""One corpus of credential shapes (redact_corpus), proved against every writer: the shim
(dash and bash, started from real shells, its parent-shell line included), the Python argv
writers and the MCP recorder. Positives lose their secrets everywhere; negatives are kept
byte for byte."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from mcpshim.log import redact
from mcpshim.log.logview import argv_fields
from mcpshim.relay.core import C2S, Recorder
from mcpshim.shim import install as shim_install
from tests.fixtures.home import Home, dash_path
from tests.fixtures.redact_corpus import CORPUS, NEGATIVE, PEM, PEM_BODY, POSITIVE, PW, Shape


def _check(shape: Shape, got: Sequence[bytes], where: str) -> None:
    if shape.negative:
        assert tuple(got) == tuple(a.encode() for a in shape.args), (where, shape.name)
        return
    blob = b"\0".join(got)
    for secret in shape.secrets:
        assert secret.encode() not in blob, (where, shape.name, secret, blob)


def test_the_corpus_holds_at_least_60_shapes_both_ways() -> None:
    assert len(CORPUS) >= 60 and len(POSITIVE) >= 40 and len(NEGATIVE) >= 20
    assert len({s.name for s in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("shape", CORPUS, ids=lambda s: s.name)
def test_python_argv_writers(shape: Shape) -> None:
    # procinfo, snapshot and trace records pass the whole argv, command first
    argv = [shape.command.encode(), *(a.encode() for a in shape.args)]
    red = redact.redact_argv(argv)
    assert red.argv[0] == argv[0]
    _check(shape, red.argv[1:], "redact_argv")
    fields = argv_fields("cmdline", argv)
    _check(shape, [a.encode() for a in fields["cmdline"][1:]], "argv_fields")
    assert bool(fields.get("cmdline_redacted")) != shape.negative


def _mcp_arguments(shape: Shape, arguments: dict[str, Any]) -> dict[str, Any]:
    got: list[tuple[str, dict[str, Any]]] = []
    rec = Recorder(lambda k, p: got.append((k, p)), "S")
    params = {"name": "run", "arguments": arguments}
    line = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    rec.message(C2S, 1.0, json.dumps(line).encode())
    [(kind, payload)] = got
    assert kind == "mcp-request", payload
    return payload


@pytest.mark.parametrize("shape", CORPUS, ids=lambda s: s.name)
def test_mcp_recorder(shape: Shape) -> None:
    argv = [shape.command, *shape.args]
    payload = _mcp_arguments(shape, {"argv": argv, "line": shlex.join(argv)})
    args = payload["arguments"]
    _check(shape, [a.encode() for a in args["argv"][1:]], "mcp argv")
    if shape.negative:
        assert args["line"] == shlex.join(argv)
        assert "redacted" not in payload
    elif not shape.whole_only:
        for secret in shape.secrets:
            assert secret not in args["line"], (shape.name, secret)


def test_mcp_recorder_blanks_credential_keys_and_keeps_the_rest() -> None:
    long_pw = "p" * 3000  # the `@` that makes it a password lies past the scan window
    arguments = {
        "token": PW,
        "apiKey": PW,
        "accessToken": PW,
        "authorization": "Bearer abc",
        "Password": PW,
        "pass": PW,
        "secret": PW,
        "KEY": PW,
        "client_secret": PW,
        "nested": {"auth": {"value": PW}, "list": [{"password": PW}]},
        "headers": {"X-Api-Key": PW, "Accept": "text/plain"},
        "url": f"https://x.example/api?page=1&token={PW}",
        "pem": f"key:\n{PEM}\n",
        "far": f"https://user:{long_pw}@host.example/path",
        # kept
        "path": "/tmp/token-list.txt",
        "tokenizer": "bpe",
        "keyboard": "us",
        "count": 5,
        "none": None,
        "question": "what is a token?",
        "keys": ["a", "b"],
    }
    payload = _mcp_arguments(POSITIVE[0], arguments)
    args = payload["arguments"]
    text = json.dumps(args)
    assert PW not in text and "abc" not in text and PEM_BODY not in text and "pppp" not in text
    assert args["far"].startswith("https://user:[REDACTED:url-password]@host.example")
    for key in ("path", "tokenizer", "keyboard", "count", "none", "question", "keys"):
        assert args[key] == arguments[key], key
    assert args["headers"]["Accept"] == "text/plain"
    assert {"credential-name", "private-key", "url-password"} <= set(payload["redacted"])


def _fake_targets(tmp_path: Path, names: Sequence[str]) -> dict[str, str]:
    """Stand-ins named like the real commands (a command's own options follow its name)."""
    d = tmp_path / "bin"
    d.mkdir()
    out = {}
    for n in names:
        (d / n).write_text("#!/bin/sh\nexit 0\n")
        (d / n).chmod(0o755)
        out[n] = str(d / n)
    return out


def _raw_log(home: Home) -> bytes:
    spills = sorted(home.loc.spill_dir.glob("*")) if home.loc.spill_dir.is_dir() else []
    return home.loc.log_file.read_bytes() + b"".join(p.read_bytes() for p in spills)


def _interpreter(kind: str, tmp_path: Path) -> str:
    if kind == "dash":
        return dash_path()
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash not installed")
    if kind == "bash":
        return bash
    (tmp_path / "as-sh").mkdir()
    (tmp_path / "as-sh" / "sh").symlink_to(bash)
    return str(tmp_path / "as-sh" / "sh")


@pytest.mark.parametrize("kind", ["dash", "bash-as-sh", "bash"])
@pytest.mark.parametrize("parent", ["sh", "dash", "bash"])
def test_shim_from_a_real_shell(home: Home, tmp_path: Path, kind: str, parent: str) -> None:
    """Each shape through its shim, all started by one `PARENT -c` line; the record's
    arguments are what Python makes of them, and the parent's line (which holds every
    shape) loses every secret too."""
    interpreter = _interpreter(kind, tmp_path)
    targets = _fake_targets(tmp_path, sorted({s.command for s in CORPUS}))
    shim_install.install(home.loc, [], targets, interpreter=interpreter, allow_unsafe=True)
    script = "\n".join(shlex.join([str(home.loc.shim_dir / s.command), *s.args]) for s in CORPUS)
    subprocess.run([parent, "-c", script], env=home.env, check=True, timeout=300)
    recs = home.execs()
    assert [r.shim for r in recs] == [s.command for s in CORPUS]
    for shape, rec in zip(CORPUS, recs, strict=True):
        _check(shape, rec.args, f"shim {parent}")
        want = redact.redact_argv([a.encode() for a in shape.args], command=shape.command)
        assert rec.args == want.argv, shape.name
        # (the first record's also name the rules that fired on its parent's line)
        assert set(want.rules) <= set(rec.redactions), shape.name
        assert rec is recs[0] or set(rec.redactions) == set(want.rules), shape.name
    # The parent's argv, exactly, scrubbed as any argv: its composed line holds every shape
    # as text (a shape known only as a whole argument is one word of it: see Shape)
    assert recs[0].parent_argv == redact.redact_argv([parent.encode(), b"-c", script.encode()]).argv
    raw = _raw_log(home)
    for shape in POSITIVE:
        for secret in shape.secrets:
            if not any(secret in s.secrets for s in POSITIVE if s.whole_only):
                assert secret.encode() not in raw, (shape.name, secret)
