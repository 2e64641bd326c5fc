"""Issue 28 item 5's acceptance: every positive shape of the credential corpus (vendor tokens,
option values, quoted values in composed lines...) through every path mcpshim records, and
every output it writes, leaves no raw value on disk.

The paths: a shim's argv as given; inside `sh -c` and `bash -c` lines (the parent shell's
argv is kept too); as `"$@"` of a parent shell; a real `mcpshim run --mcp` session (traced
where strace can trace) whose SDK client passes each shape as a tool call's arguments (a
list, a string, nested objects, headers) and whose SDK server runs the list through the
shims. The outputs: `log` (text, JSON, ECS), `tree --format json`, `review` (JSON, SARIF),
`report` (HTML, Markdown) and `export otlp` to a real receiver, each written under HOME.
Then every file under HOME (the log directory, the shims, the outputs) is read and no
secret may be in it, raw or in an encoding a writer uses (strace's and JSON's escapes,
hex, base64, HTML)."""

from __future__ import annotations

import base64
import html
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpshim.shim import install as shim_install
from tests.fixtures.contract import findings_code, sarif_code
from tests.fixtures.home import FIXTURES, Home
from tests.fixtures.redact_corpus import POSITIVE, Shape
from tests.fixtures.runhelp import events, poll

MCPSHIM = [sys.executable, "-m", "mcpshim"]
ARGS_SERVER = FIXTURES / "mcp_args_server.py"


def _encodings(secret: str) -> dict[str, bytes]:
    raw = secret.encode()
    return {
        "raw": raw,
        "strace": "".join(f"\\x{b:02x}" for b in raw).encode(),
        "hex": raw.hex().encode(),
        "json": json.dumps(secret)[1:-1].encode(),
        "json-ascii": json.dumps(secret, ensure_ascii=True)[1:-1].encode(),
        "base64": base64.b64encode(raw).rstrip(b"="),
        "html": html.escape(secret, quote=True).encode(),
    }


def _fake_targets(root: Path, names: set[str]) -> dict[str, str]:
    d = root / "bin"
    d.mkdir()
    out = {}
    for n in sorted(names):
        (d / n).write_text("#!/bin/sh\nexit 0\n")
        (d / n).chmod(0o755)
        out[n] = str(d / n)
    return out


def _status(args: tuple[str, ...], stdout: bytes) -> int:
    """The status the contract gives: review's from the findings it printed (JSON or
    SARIF, default --fail-on medium); every other command here exits 0."""
    if args[0] != "review":
        return 0
    doc = json.loads(stdout)
    return sarif_code(doc) if "sarif" in args else findings_code(doc)


def _cli(home: Home, *args: str, out: Path | None = None) -> None:
    head = 2 if args[0] == "export" else 1  # (the options follow the command's own name)
    argv = [*MCPSHIM, *args[:head], "--dir", str(home.loc.shim_dir), *args[head:]]
    done = subprocess.run(argv, env=home.env, capture_output=True, timeout=600, check=False)
    assert done.returncode == _status(args, done.stdout), (args, done.stderr)
    if out is not None:
        out.write_bytes(done.stdout)


def _mcp_session(home: Home, shapes: list[Shape]) -> str:
    before = {e["session"] for e in events(home, "session-start")}
    run = ["run", "--dir", str(home.loc.shim_dir), "--mcp", "--on-exit", "terminate"]
    params = StdioServerParameters(
        command=MCPSHIM[0],
        args=[*MCPSHIM[1:], *run, "--", sys.executable, str(ARGS_SERVER)],
        env=home.env,
    )

    async def drive() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            for shape in shapes:
                argv = [shape.command, *shape.args]
                line = "" if shape.whole_only else shlex.join(argv)  # (see Shape.whole_only)
                secret = shape.secrets[0]
                arguments: dict[str, Any] = {
                    "argv": argv,
                    "line": line,
                    "options": {"nested": {"argv": argv, "line": line, "list": [argv]}},
                    "headers": {
                        "Authorization": f"Bearer {secret}",
                        "Cookie": f"s={secret}",
                        "X-Api-Key": secret,
                        "X-Line": line,
                    },
                }
                await s.call_tool("run", arguments)

    anyio.run(drive)

    def ended() -> str | None:
        new = [e["session"] for e in events(home, "session-start") if e["session"] not in before]
        return str(new[0]) if new and events(home, "session-end", new[0]) else None

    return poll(ended, "the session to end", 300)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")
def test_every_path_and_every_output_keeps_every_secret_off_the_disk(
    home: Home, tmp_path: Path
) -> None:
    shapes = list(POSITIVE)
    assert len(shapes) >= 60
    targets = _fake_targets(tmp_path, {s.command for s in shapes})
    shim_install.install(home.loc, [], targets, allow_unsafe=True)
    shim = {n: str(home.loc.shim_dir / n) for n in targets}
    env = {**home.env, "PATH": f"{home.loc.shim_dir}:/usr/bin:/bin"}
    # A shim's argv as given (started from Python), then as "$@" of a parent shell.
    for shape in shapes:
        subprocess.run([shim[shape.command], *shape.args], env=env, check=True, timeout=60)
        wrapped = ["/bin/sh", "-c", '"$@"', "sh", shim[shape.command], *shape.args]
        subprocess.run(wrapped, env=env, check=True, timeout=60)
    # Inside composed lines: each shape one line of one script, run by sh and by bash.
    script = "\n".join(shlex.join([shim[s.command], *s.args]) for s in shapes if not s.whole_only)
    for shell in ("sh", "bash"):
        subprocess.run([shell, "-c", script], env=env, check=True, timeout=300)
    sid = _mcp_session(home, shapes)
    assert len([e for e in events(home, "mcp-request", sid)]) == len(shapes)
    # Every output, written under HOME.
    out = home.root / "out"
    out.mkdir()
    for name, args in {
        "log.txt": ["log"],
        "log.json": ["log", "--format", "json"],
        "log.ecs": ["log", "--format", "ecs"],
        "tree.json": ["tree", "--format", "json"],
        "review.json": ["review", "--format", "json"],
        "review.sarif": ["review", "--format", "sarif"],
        "session.sarif": ["review", "--session", sid, "--format", "sarif"],
    }.items():
        _cli(home, *args, out=out / name)
    _cli(home, "report", "--session", sid, "-o", str(out / "report.html"))
    _cli(home, "report", "--session", sid, "--format", "md", "-o", str(out / "report.md"))
    pytest.importorskip("opentelemetry.proto")
    from tests.fixtures.otlp_receiver import receiver

    with receiver() as got:
        _cli(home, "export", "otlp", "--session", sid, "--endpoint", got.url)
        spans = got.spans()
        (out / "otlp.bin").write_bytes(b"".join(got.bodies))
    assert spans and (out / "report.html").stat().st_size > 0
    # 0 raw values on disk: every file under HOME, every secret, every encoding.
    files = [Path(d) / f for d, _, fs in os.walk(home.root) for f in fs]
    data = {p: p.read_bytes() for p in files if p.is_file() and not p.is_symlink()}
    assert any(p.name == "exec.log" for p in data) and len(data) > 10
    leaks = [
        (shape.name, kind, str(path.relative_to(home.root)))
        for shape in shapes
        for secret in shape.secrets
        for kind, needle in _encodings(secret).items()
        for path, blob in data.items()
        if needle in blob
    ]
    assert leaks == [], leaks
    # (the outputs hold what was recorded: the shapes' other words, their markers)
    for name in ("log.ecs", "tree.json", "review.sarif", "report.html", "report.md", "otlp.bin"):
        blob = data[out / name]
        assert b"[REDACTED:" in blob, name
    assert b"api.stripe.com" in data[out / "log.ecs"] and b"stripe-key" in data[out / "otlp.bin"]
