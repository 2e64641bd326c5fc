"""`run --on-departure terminate` acts on the trace's execs as they arrive (issue 30 item 2):
a traced tool runs a script that execs an unapproved binary, which exits at once (well
within 50 ms); a 100 ms sampler never sees it and no shim does (it is run by absolute
path), but its traced exec is read within a few milliseconds: a `departure` record names
it and the whole family is ended. Official SDK client and server, real shims, real strace.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import anyio
from mcp.client.session import ClientSession

from tests.fixtures.approvescenario import run_mcp
from tests.fixtures.home import Home, install
from tests.fixtures.mcpscenario import TOOLS
from tests.fixtures.runhelp import events, needs_trace, session_pids

SERVER = [sys.executable, str(TOOLS)]


@needs_trace
def test_a_fast_exec_of_an_unapproved_binary_ends_the_family(home: Home, tmp_path: Path) -> None:
    install(home, ["git", "sh"])
    work = tmp_path / "build"
    work.mkdir()
    evil = work / "evil"
    script = work / "build.sh"  # read by the shimmed sh: an approved program
    script.write_text(f'#!/bin/sh\n[ -x "{evil}" ] && "{evil}"\nexit 0\n')
    line = f"sh {script}"
    lock = tmp_path / "mcpshim.lock"

    async def approve_me(s: ClientSession) -> None:
        await s.list_tools()
        await s.call_tool("shell", {"line": line})
        await anyio.sleep(0.1)

    first, _ = run_mcp(home, SERVER, approve_me)
    approve = [sys.executable, "-m", "mcpshim", "approve", "--dir", str(home.loc.shim_dir),
               "--session", first, "--lock", str(lock), "--yes"]  # fmt: skip
    assert subprocess.run(approve, env=home.env, capture_output=True).returncode == 0
    shutil.copy("/bin/true", evil)  # now the script runs a program no card lists

    async def depart(s: ClientSession) -> str:
        await s.list_tools()
        try:
            await s.call_tool("shell", {"line": line})
            await anyio.sleep(3.0)
            await s.call_tool("git_version", {})
        except Exception as exc:  # the server is gone: the client's call fails
            return type(exc).__name__
        return "still served"

    opts = ("--lock", str(lock), "--on-departure", "terminate")
    second, out = run_mcp(home, SERVER, depart, *opts)
    assert out != "still served"
    [dep] = events(home, "departure", second)
    assert dep["what"] == "new executable" and dep["path"] == str(evil), dep
    assert dep["source"] == "trace" and dep["argv"] == [str(evil)]
    kinds = [e["kind"] for e in events(home, None, second)]
    assert "terminated" in kinds[kinds.index("departure") :]  # evidence first, then the end
    assert session_pids(second) == []
    [end] = events(home, "session-end", second)
    assert end["terminated"] is True and end["survivors"] == 0
    # the binary was over long before the family was ended: it was seen in the trace only
    assert not [r for r in home.execs() if r.session == second and r.target == bytes(evil)]
    assert not [e for e in events(home, "observed", second) if e.get("exe") == str(evil)]


def test_run_help_says_it_is_containment_not_prevention() -> None:
    from click.testing import CliRunner

    from mcpshim.cli import cli

    text = " ".join(CliRunner().invoke(cli, ["run", "--help"]).output.split())
    assert "Containment, not prevention: it acts after the exec" in text
    assert "between the exec and the signal the program runs, and what it starts" in text
    assert "a short one's whole run, one that ignores SIGTERM until --grace is over" in text
    assert "an MCP log notification tell the client" in text
