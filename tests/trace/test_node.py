"""The issue's case: a Node.js MCP server (official TypeScript SDK) whose tool runs
child_process.exec("git status --short; echo hi"), driven by the official Python SDK client
through `mcpshim run --trace`. Every exec of the family is recorded, the /bin/sh -c line
exactly, and review names it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpshim.family.trace_merge import pair_shim_records
from mcpshim.review.engine import review
from mcpshim.review.policy import default_policy
from mcpshim.trace.probe import trace_unavailable
from tests.fixtures.home import Home, install
from tests.fixtures.runhelp import events, only_session, poll

MCPSHIM_BIN = Path(sys.executable).parent / "mcpshim"
LINE = "git status --short; echo hi"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or trace_unavailable(None)[0] is None,
    reason="needs Linux with strace allowed to trace its children",
)


async def _call(params: StdioServerParameters) -> str:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        assert [t.name for t in tools.tools] == ["git_status"]
        result = await session.call_tool("git_status", {})
        assert not result.is_error, result
        text: Any = result.content[0]
        return str(text.text)


def test_node_exec_line_traced(home: Home, node_server: Path, tmp_path: Path) -> None:
    install(home, ["git"])
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "new-file").write_text("x")
    params = StdioServerParameters(
        command=str(MCPSHIM_BIN),
        args=["run", "--dir", str(home.loc.shim_dir), "--trace", "--", "node", str(node_server)],
        env=home.env,
        cwd=str(repo),
    )
    text = anyio.run(_call, params)
    assert text == "?? new-file\nhi\n"
    poll(lambda: events(home, "session-end"), "session-end")
    sid = only_session(home)
    [start] = events(home, "session-start")
    recs = events(home, "trace-exec", sid)
    ok = [r for r in recs if r["result"] == "ok" and not r.get("shim_helper")]
    # Every exec of the family, in order: the server, the shell, the git shim, its target.
    [shim_rec] = home.execs()
    assert [(r["filename"], r["argv"]) for r in ok] == [
        (ok[0]["filename"], ["node", str(node_server)]),
        ("/bin/sh", ["/bin/sh", "-c", LINE]),
        (str(home.loc.shim_dir / "git"), ["git", "status", "--short"]),
        (os.fsdecode(shim_rec.target), [os.fsdecode(shim_rec.target), "status", "--short"]),
    ]
    node, sh, script, git = ok
    assert os.path.basename(str(node["filename"])) == "node"
    assert node["pid"] == start["child_pid"] and node["start"] == start["child_start"]
    assert sh["ppid"] == node["pid"] and sh["parent_start"] == node["start"]
    assert sh["cwd"] == str(repo) and sh["exit_status"] == 0
    assert script["pid"] == git["pid"] and git["ppid"] == sh["pid"]
    assert git["via_shim"] == "git" and git["exit_status"] == 0
    # The shim saw git with sh as parent and the same identity; the merge pairs them.
    assert (shim_rec.pid, shim_rec.start, shim_rec.ppid) == (git["pid"], git["start"], sh["pid"])
    [pair] = pair_shim_records(home.records())
    assert pair.target is not None and {"kind": "trace-exec", **pair.target.data} == git
    [summary] = events(home, "trace-summary", sid)
    assert summary["complete"] is True and summary["gaps"] == 0
    # Review names the composed line the shims alone could not see.
    result = review(home.records(), policy=default_policy(), shim_dir=str(home.loc.shim_dir))
    [f401] = [f for f in result.findings if f.rule.id == "MCS401"]
    assert LINE in f401.message and "command list ;" in f401.message
