"""Issue 27's defects, each on a real session: shims in a --dir, interpreter options,
hooks and scripts as editable files, baselines of failed execs, generic shell tools."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpshim.shim import install as shim_install
from mcpshim.shim.manifest import locations_for
from tests.fixtures.contract import fail_on_of, findings_code
from tests.fixtures.home import FIXTURES, Home, install
from tests.fixtures.mcpscenario import quiet_npm_env, run_session
from tests.fixtures.runhelp import MCPSHIM, needs_trace, only_session, run

TOOLS = FIXTURES / "mcp_tools_server.py"


def _cli(home: Home, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run([*MCPSHIM, *args, "--format", "json"], env=env or home.env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    doc: dict[str, Any] = json.loads(proc.stdout)
    assert args[0] == "review" and proc.returncode == findings_code(doc, fail_on_of(args))
    return doc


def _relayed(
    home: Home, calls: list[tuple[str, dict[str, Any]]], env: dict[str, str], cwd: Path, *opts: str
) -> str:
    """A traced `mcpshim run --mcp` session of the tools fixture; run's stderr."""
    err = home.root / "run.stderr"
    params = StdioServerParameters(command=MCPSHIM[0], args=[*MCPSHIM[1:], "run", "--mcp",
                                   *opts, "--", sys.executable, str(TOOLS)], env=env,
                                   cwd=str(cwd))  # fmt: skip

    async def go() -> None:
        with err.open("w") as fh:
            async with (
                stdio_client(params, errlog=fh) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                for name, args in calls:
                    await s.call_tool(name, args)
                    await anyio.sleep(0.1)

    anyio.run(go)
    return err.read_text()


@needs_trace
def test_shims_in_a_dir_are_shims(home: Home, tmp_path: Path) -> None:
    """Defect 2: shims installed with --dir D, D first on the server's PATH, run without
    --dir: the shim's own exec of its target is no bypass, its script no shadow."""
    shims = tmp_path / "myshims"
    loc = locations_for(shims, home.loc.log_dir)
    shim_install.install(loc, ["git"], {})
    env = {**quiet_npm_env(home.env), "PATH": f"{shims}:{home.env['PATH']}"}
    stderr = _relayed(home, [("git_version", {})], env, home.root)
    assert "only sampling will see the family" not in stderr, stderr
    sid = only_session(home)
    doc = _cli(home, "review", "--session", sid, env=env)
    assert not [f for f in doc["findings"] if f["rule"] in ("MCS120", "MCS119", "MCS405")]
    [cov] = doc["coverage"]
    assert cov["commands"]["git"] == {"through_shim": 1, "bypassed": 0}, cov


@needs_trace
@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_an_option_value_is_not_a_script(home: Home, tmp_path: Path) -> None:
    """Defect 5: `node --conditions node x.js` runs x.js; `node` there is a value."""
    node = os.path.realpath(shutil.which("node") or "")
    install(home, ["node"])
    script = tmp_path / "x.js"
    script.write_text("1;\n")
    assert run(home, [node, "--conditions", "node", str(script)], cwd=tmp_path).returncode == 0
    doc = _cli(home, "review", "--dir", str(home.loc.shim_dir), "--session", only_session(home))
    assert not [f for f in doc["findings"] if f["rule"] == "MCS120"], doc["findings"]


@needs_trace
def test_hooks_and_workspace_scripts_are_editable_files(home: Home, tmp_path: Path) -> None:
    """Defect 6: a git hook and `sh build.sh` ran: "command from an editable file" says so."""
    install(home, ["git", "sh"])
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    env0 = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q"], cwd=repo, env=env0, check=True)
    hook = repo / ".git/hooks/pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    (repo / "build.sh").write_text("exit 0\n")
    line = " ".join([*git, "commit", "-q", "--allow-empty", "-m", "x"])
    calls = [("shell", {"line": line}), ("shell", {"line": "sh build.sh"})]
    env = {**quiet_npm_env(home.env), "GIT_CONFIG_NOSYSTEM": "1"}
    _relayed(home, calls, env, repo, "--dir", str(home.loc.shim_dir))
    doc = _cli(home, "review", "--dir", str(home.loc.shim_dir), "--session", only_session(home))
    hook_call, script_call = doc["calls"]
    assert any("git hook" in y and "pre-commit" in y for y in hook_call["editable"]), hook_call
    assert any("build.sh" in y for y in script_call["editable"]), script_call


@needs_trace
def test_a_baseline_names_no_empty_target(home: Home, tmp_path: Path) -> None:
    """Defect 9: a failed exec ran nothing: the baseline holds no "" target, and review
    against it does not say `curl ran , not in the baseline`."""
    install(home, ["git"])
    line = "/nonexistent/curl -s x 2>/dev/null; git --version >/dev/null; exit 0"
    assert run(home, ["sh", "-c", line]).returncode == 0
    sid = only_session(home)
    base = tmp_path / "base.toml"
    save = [*MCPSHIM, "baseline", "save", "--dir", str(home.loc.shim_dir), "--session", sid]
    subprocess.run([*save, "-o", str(base)], env=home.env, check=True, capture_output=True)
    saved = tomllib.loads(base.read_text())["commands"]
    assert "curl" not in saved and all(all(c["targets"]) for c in saved.values()), saved
    doc = _cli(home, "review", "--dir", str(home.loc.shim_dir), "--session", sid,
               "--baseline", str(base))  # fmt: skip
    drift = [f["message"] for f in doc["findings"] if f["rule"] in ("MCS115", "MCS116", "MCS117")]
    assert drift == [], drift


def test_a_tool_that_runs_any_command_explains_what_it_runs(home: Home) -> None:
    """Defect 11: `shell` says it runs commands: the programs it starts are explained."""

    async def calls(s: ClientSession) -> None:
        await s.call_tool("shell", {"line": "git --version; exit 0"})

    run_session(home, "S-any", calls)
    doc = _cli(home, "review", "--dir", str(home.loc.shim_dir), "--session", "S-any")
    assert not [f for f in doc["findings"] if f["rule"] == "MCS502"], doc["findings"]
