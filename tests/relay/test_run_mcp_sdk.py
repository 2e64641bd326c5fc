"""`mcpshim run --mcp` end to end: the SDK's client drives the SDK's server through the real
CLI; review, tree and report file every process under the tool call that started it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.fixtures.home import Home, install
from tests.fixtures.mcpscenario import SHIMS, TOOLS, attribution_of, make_package, quiet_npm_env
from tests.fixtures.runhelp import events, poll, session_pids

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def _cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [*MCPSHIM, *args[:1], "--dir", str(home.loc.shim_dir), *args[1:]]
    return subprocess.run(argv, env=home.env, capture_output=True, text=True, timeout=120)


def test_run_mcp_attributes_processes_to_tool_calls(home: Home, tmp_path: Path) -> None:
    install(home, SHIMS)
    pkg = make_package(tmp_path)
    run = [
        "run",
        "--dir",
        str(home.loc.shim_dir),
        "--mcp",
        "--on-exit",
        "terminate",
        "--grace",
        "1",
        "--",
        sys.executable,
        str(TOOLS),
    ]
    params = StdioServerParameters(
        command=MCPSHIM[0], args=[*MCPSHIM[1:], *run], env=quiet_npm_env(home.env)
    )

    async def drive() -> str:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            r = await s.call_tool("run_test", {"package_dir": str(pkg)})
            await anyio.sleep(0.2)
            await s.call_tool("git_version", {})
            return r.content[0].text  # type: ignore[union-attr]

    assert "1 test passed" in anyio.run(drive)
    [start] = poll(lambda: events(home, "session-end") and events(home, "session-start"), "end")
    sid = start["session"]
    assert events(home, "mcp-session", sid)
    assert session_pids(sid) == []  # --on-exit terminate: the helper is gone too
    att = attribution_of(home, sid)
    assert att.server is not None and att.server.known  # the sampler observed the server
    assert att.server.pid == start["child_pid"]
    # The helper is under npm's tree, or (traced, its start slowed down) a top process of
    # the call of its own: test.js had exited and the helper's shim saw the supervisor as
    # its parent. Under run_test either way.
    assert [n for n in att.processes(0) if n.images[0].command == "npm"]
    [git] = att.processes(1)
    assert git.images[0].command == "git"
    ran = [n for top in att.processes(0) for n in top.walk()]
    [helper] = [n for n in ran if n.images[0].command == "sleep"]
    assert helper.id in att.outlived
    # review: findings filed under the call, MCS501 among them.
    done = _cli(home, "review", "--session", sid, "--format", "json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    groups = {f["rule"]: f["group"] for f in doc["findings"]}
    assert ": tools/call run_test (id" in groups["MCS501"]
    assert ": tools/call run_test (id" in groups["MCS107"]  # npm test's finding
    assert ": tools/call run_test (id" in groups["MCS301"]  # the supervisor's survivor
    git_groups = [f["group"] for f in doc["findings"] if f["rule"] == "MCS101"]
    assert any(": tools/call git_version (id" in g for g in git_groups)
    # The text lists the family, then the calls in the order they were made (run_test's
    # name sorts after git_version's).
    done = _cli(home, "review", "--session", sid)
    heads = [line for line in done.stdout.splitlines() if line.startswith("== ")]
    assert "family" in heads[0], heads
    tools = [h.split(": tools/call ")[1].split()[0] for h in heads[1:]]
    assert tools == ["run_test", "git_version"], heads
    # tree: the tool-call view after the family.
    done = _cli(home, "tree", "--session", sid)
    assert done.returncode == 0, done.stderr
    calls = done.stdout.split("tool calls in session", 1)[1]
    # (sleep hangs under node test.js, or, when node had exited before sleep's shim read its
    # parent, beside npm: a shim record's ppid is then the subreaper's, and the process model
    # links a process at its first record; the trace's fork parent comes later)
    own = calls.split("tools/call git_version", 1)[0]
    assert own.index("run_test") < own.index("npm test") and "sleep 30" in own
    assert "outlived its call" in calls and calls.index("git_version") > calls.index("sleep 30")
    # report: the last --mcp session by default.
    out = tmp_path / "r.md"
    done = _cli(home, "report", "--format", "md", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert sid in out.read_text() and "MCS501" in out.read_text()
