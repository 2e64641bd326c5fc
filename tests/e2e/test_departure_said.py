"""A termination is said (issue 39 item 5): before `run --on-departure terminate` ends the
family, the client gets an MCP log notification (`notifications/message`, between the
server's lines) and the server's stderr one line naming the departure; plain `review`, not
only `review --lock`, files the termination under the call that departed. The SDK's client
drives a real SDK server through the real `mcpshim run --mcp`, with each relay: the pump
child, and the gate of --enforce."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.e2e.test_contain import _call, _calls
from tests.fixtures.approvescenario import MCPSHIM, run_mcp
from tests.fixtures.home import FIXTURES, Home, install
from tests.fixtures.mcpscenario import quiet_npm_env
from tests.fixtures.runhelp import command as mcpshim
from tests.fixtures.runhelp import events, needs_trace, poll

SERVER = [sys.executable, str(FIXTURES / "mcp_contain_server.py")]
pytestmark = needs_trace


def _session_told(home: Home, lock: Path, argv: list[str], errlog: Path, *opts: str) -> Any:
    """One session that calls `run` with `argv`; (what the call got, the log messages the
    client was sent)."""
    run = ["run", "--dir", str(home.loc.shim_dir), "--mcp", "--name", "said", "--lock",
           str(lock), "--on-departure", "terminate", "--grace", "1", *opts,
           "--", *SERVER]  # fmt: skip
    params = StdioServerParameters(command=MCPSHIM[0], args=[*MCPSHIM[1:], *run],
                                   env=quiet_npm_env(dict(home.env)))  # fmt: skip
    told: list[Any] = []

    async def logged(params: Any) -> None:
        told.append(params)

    async def drive() -> Any:
        with errlog.open("w") as err:
            async with (
                stdio_client(params, errlog=err) as (read, write),
                ClientSession(read, write, logging_callback=logged) as s,
            ):
                await s.initialize()
                await s.list_tools()
                try:
                    return await s.call_tool("run", {"argv": argv})
                except Exception as exc:  # the family, the server with it, was ended
                    return exc

    return anyio.run(drive), told


@pytest.mark.parametrize("relay", ["pump child", "gate"])
def test_the_client_and_stderr_are_told_and_review_files_it_under_the_call(
    home: Home, tmp_path: Path, relay: str
) -> None:
    install(home, ["git"])
    sid, _ = run_mcp(home, SERVER, _calls(_call("run", argv=["git", "--version"])),
                     "--name", "said")  # fmt: skip
    lock = tmp_path / "mcpshim.lock"
    done = mcpshim(home, "approve", "--session", sid, "--lock", str(lock), "--yes")
    assert done.returncode == 0, done.stderr
    napper = tmp_path / "bin" / "napper"  # a copied binary the lock never saw
    napper.parent.mkdir()
    shutil.copy(shutil.which("sleep") or "/bin/sleep", napper)
    before = {e["session"] for e in events(home, "session-start")}
    opts = ("--enforce",) if relay == "gate" else ()
    got, told = _session_told(home, lock, [str(napper), "30"], tmp_path / "stderr", *opts)
    # (the call gets no answer, or the one a server writes as SIGTERM ends its child first)
    assert isinstance(got, Exception) or "status -15" in str(got)
    [note] = told
    assert note.level == "critical" and note.logger == "mcpshim"
    assert f"departure from {lock}: new executable {napper}" in note.data
    assert "ending the server's family" in note.data
    err = (tmp_path / "stderr").read_text().splitlines()
    assert [ln for ln in err if "departure from" in ln] == [note.data]  # one line, the same

    [sid] = [e["session"] for e in events(home, "session-start") if e["session"] not in before]
    poll(lambda: events(home, "session-end", sid), "the end")
    [dep] = events(home, "departure", sid)
    assert dep["path"] == str(napper) and dep["boot_id"]
    text = mcpshim(home, "review", "--session", sid).stdout
    call = text.split("tools/call run (id 3)")[1].split("\n== ")[0]
    assert (
        f"[HIGH] MCS537 departure-terminated-family (observed): the family was terminated at a "
        f"departure: new executable {napper}"
    ) in call, text
    held = mcpshim(home, "review", "--session", sid, "--lock", str(lock)).stdout
    call = held.split("tools/call run (id 3)")[1].split("\n== ")[0]
    assert "[HIGH] MCS537 departure-terminated-family" in call, held
    doc = json.loads(mcpshim(home, "review", "--session", sid, "--format", "json").stdout)
    [mine] = [f for f in doc["findings"] if f["rule"] == "MCS537"]
    assert mine["severity"] == "high" and mine["call"]["name"] == "run"
