"""One session resolver for every command (issue 30 item 6): `--session last` and a unique
prefix mean the same session to review, tree, log, approve, report and export otlp (export
once said "session last was not run with --mcp"). For the commands that read tool calls,
`last` is the newest session run with --mcp, even when a plain `run` came after it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import click
from mcp.client.session import ClientSession

from mcpshim.cli import COMMAND_MODULES, cli
from tests.fixtures.approvescenario import run_mcp
from tests.fixtures.contract import findings_code
from tests.fixtures.home import FIXTURES, Home, install
from tests.fixtures.otlp_receiver import receiver
from tests.fixtures.runhelp import events

MCPSHIM = [sys.executable, "-m", "mcpshim"]
SERVER = [sys.executable, str(FIXTURES / "mcp_drift_server.py")]


def _mcpshim(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [*MCPSHIM, *args, "--dir", str(home.loc.shim_dir)]
    if "--" in args:
        i = args.index("--")
        argv = [*MCPSHIM, *args[:i], "--dir", str(home.loc.shim_dir), *args[i:]]
    return subprocess.run(argv, env=home.env, capture_output=True, text=True, timeout=120)


async def _one_call(s: ClientSession) -> None:
    await s.list_tools()
    await s.call_tool("lookup", {"what": "x"})
    await anyio.sleep(0.05)


def test_last_and_a_prefix_name_the_same_session_everywhere(home: Home, tmp_path: Path) -> None:
    install(home, ["git"])
    relayed, _ = run_mcp(home, SERVER, _one_call)
    plain = _mcpshim(home, "run", "--no-trace", "--", "git", "--version")
    assert plain.returncode == 0, plain.stderr
    prefix = relayed[: len(relayed) - 4]
    for value in ("last", prefix, relayed):
        with receiver() as got:
            done = _mcpshim(home, "export", "otlp", "--session", value, "--endpoint", got.url)
            assert done.returncode == 0, (value, done.stderr)
            spans = got.spans()
        assert any(s["name"] == "execute_tool lookup" for s in spans), value
        done = _mcpshim(home, "report", "--session", value, "--format", "md")
        assert done.returncode == 0 and relayed in done.stdout, (value, done.stderr)
        lock = tmp_path / f"{value}.lock"
        done = _mcpshim(home, "approve", "--session", value, "--lock", str(lock), "--yes")
        assert done.returncode == 0 and f"session {relayed}" in done.stdout, (value, done.stderr)
    # review, tree and log take any session: `last` is the plain run, a prefix still the relayed
    for cmd in (["review", "--format", "json"], ["tree", "--format", "json"], ["log"]):
        done = _mcpshim(home, *cmd, "--session", prefix)
        want = findings_code(json.loads(done.stdout)) if cmd[0] == "review" else 0
        assert done.returncode == want and relayed in done.stdout, (cmd, done.stderr)
    done = _mcpshim(home, "log", "--session", "last", "--format", "json")
    assert {json.loads(line)["session"] for line in done.stdout.splitlines()} == {plain_id(home)}
    # a prefix of no session, and `last` with no relayed session in a log, say so
    done = _mcpshim(home, "export", "otlp", "--session", "zz", "--endpoint", "http://127.0.0.1:1")
    assert done.returncode == 2 and "no such session 'zz'" in done.stderr, done.stderr


def plain_id(home: Home) -> str:
    ids = [str(e["session"]) for e in events(home, "session-start")]
    return ids[-1]


def _commands(group: click.Group, ctx: click.Context) -> list[tuple[str, click.Command]]:
    out = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            continue
        out.append((f"{ctx.command_path} {name}", cmd))
        if isinstance(cmd, click.Group):
            out += _commands(cmd, click.Context(cmd, info_name=name, parent=ctx))
    return out


def test_every_session_option_goes_through_the_one_resolver() -> None:
    """Each user-facing --session is session_option's (its help says what it takes); the
    resolver behind it is checked above."""
    ctx = click.Context(cli, info_name="mcpshim")
    found = []
    for path, cmd in _commands(cli, ctx):
        for p in cmd.params:
            if "--session" in getattr(p, "opts", ()):
                found.append(path)
                assert isinstance(p, click.Option)
                assert "a unique prefix of one, or `last`" in (p.help or ""), path
    assert len(found) >= 7 and "mcpshim export otlp" in found, found
    assert set(COMMAND_MODULES) >= {"review", "approve", "export"}
