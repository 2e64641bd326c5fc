"""Transparency: the official MCP SDK's client drives its stdio server through `mcpshim run`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.fixtures.home import FIXTURES, Home, install
from tests.fixtures.runhelp import events, only_session, poll

SERVER = FIXTURES / "mcp_server.py"
MCPSHIM_BIN = Path(sys.executable).parent / "mcpshim"


async def _drive(params: StdioServerParameters) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        out["server"] = init.server_info.name
        tools = await session.list_tools()
        out["tools"] = sorted(t.name for t in tools.tools)
        for name in ("git_version", "session_id"):
            result = await session.call_tool(name, {})
            assert not result.is_error, result
            out[name] = result.content[0].text  # type: ignore[union-attr]
    return out


def test_sdk_client_and_server_through_run(home: Home, interpreter: str) -> None:
    install(home, ["git"], interpreter)
    params = StdioServerParameters(
        command=str(MCPSHIM_BIN),
        args=["run", "--dir", str(home.loc.shim_dir), "--", sys.executable, str(SERVER)],
        env=home.env,
    )
    out = anyio.run(_drive, params)
    assert out["server"] == "mcpshim-fixture"
    assert out["tools"] == ["git_version", "session_id"]
    assert out["git_version"].startswith("git version")
    sid = poll(lambda: events(home, "session-end") and only_session(home), "session-end")
    assert out["session_id"] == sid
    # The tool's git went through the shim and belongs to the session's family.
    [git] = [r for r in home.execs() if r.shim == "git"]
    assert git.session == sid
    assert git.args == (b"--version",)
    # The server itself (started by absolute path, not through a shim) was observed.
    [start] = events(home, "session-start")
    images = [o for o in events(home, "observed", sid) if o["pid"] == start["child_pid"]]
    # A sample can also catch the child between its spawn and its exec (then it still runs
    # the supervisor's image); the server's own image is the last one.
    server = images[-1]
    assert server["cmdline"] == [sys.executable, str(SERVER)], images
    assert server["start"] == start["child_start"]
    assert git.ppid == start["child_pid"]
    [end] = events(home, "session-end")
    assert end["exit_status"] in (0, 143)  # clean stdin EOF, or the SDK's tree kill
    assert end["survivors"] == 0
