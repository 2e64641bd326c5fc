"""The quick-start demonstration (`make demo`), on a throwaway HOME (every XDG directory,
the cache too) in the checkout's .demo-work/, deleted afterwards: nothing lands in the
user's own HOME.

A real stdio MCP server (examples/mcp_demo_server.py, official `mcp` SDK) runs under
`mcpshim run --mcp`; the SDK's own client drives it through three tool calls the way an
agent would: `git_log` (git through PATH), `search_todos` (a composed `sh -c` line) and
`run_test` (`npm test` in a throwaway package whose test script leaves a background helper
behind: run_test -> npm -> sh -> node -> test.js -> sleep), traced as `run` does by default
on Linux. Then it prints what mcpshim made of the session (review and the tool-call view of
tree, each headed by the session's coverage line: execs through shims, bypassed and why,
and whether the trace is complete) and writes the HTML report to
./artifacts/demo-report.html, outside the deleted HOME. The helper is terminated when the
session ends (--on-exit terminate): nothing is left behind.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpshim.base.display import escape
from mcpshim.log import scope
from mcpshim.paths import Locations

HERE = Path(__file__).resolve().parent
REPORT = Path.cwd() / "artifacts" / "demo-report.html"
SHIMS = ["git", "sh", "npm", "node", "sleep"]
POLICY = """\
# What each tool is expected to start (see policy.example.toml, [tools]).
[tools]
git_log = ["git"]
run_test = ["npm", "sh", "node"]

# The shell lines the server is known to run: approved, so they are routine (info).
[commands.sh]
args = ["-c grep -rn * --include=* . | head -5", "-c node test.js"]
"""
TEST_JS = """\
const { spawn } = require('child_process');
// A test helper that is started and forgotten: it outlives the test run.
spawn('sleep', ['30'], { detached: true, stdio: 'ignore' }).unref();
console.log('ok 1 - adds numbers');
"""


def _workspace(root: Path, env: dict[str, str]) -> Path:
    ws = root / "workspace"
    ws.mkdir()
    (ws / "package.json").write_text(
        json.dumps(
            {
                "name": "demo",
                "version": "1.0.0",
                "private": True,
                "scripts": {"test": "node test.js"},
            },
            indent=2,
        )
    )
    (ws / "test.js").write_text(TEST_JS)
    (ws / "index.js").write_text("// TODO: handle errors\nmodule.exports = (a, b) => a + b;\n")
    git = ["git", "-c", "user.name=demo", "-c", "user.email=demo@example.invalid"]
    for argv in (["git", "init", "-q"], ["git", "add", "."], [*git, "commit", "-qm", "demo"]):
        subprocess.run(argv, cwd=ws, env=env, check=True)
    return ws


async def _agent(params: StdioServerParameters) -> None:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        init = await s.initialize()
        print(f"\n# the SDK's client is talking to {init.server_info.name!r} through mcpshim")
        calls: list[tuple[str, dict[str, Any]]] = [
            ("git_log", {"count": 3}),
            ("search_todos", {"word": "TODO"}),
            ("run_test", {}),
        ]
        for name, args in calls:
            result = await s.call_tool(name, args)
            text = " ".join(getattr(c, "text", "") for c in result.content).strip()
            print(f"tools/call {name} {json.dumps(args)} -> {escape(text[:70])}")
            await anyio.sleep(0.3)  # an agent thinks between calls


def throwaway_env(home: Path) -> dict[str, str]:
    """This environment with HOME and every XDG dir in `home`, npm quiet, no session."""
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "npm_config_update_notifier": "false",
        "npm_config_fund": "false",
        "npm_config_audit": "false",
    }
    env.pop("MCPSHIM_SESSION", None)
    return env


def work_base() -> Path:
    """Where the throwaway HOME goes: the checkout's .demo-work/ (gitignored), never the
    user's HOME."""
    base = HERE.parent / ".demo-work"
    base.mkdir(parents=True, exist_ok=True)
    return base


def demo_policy() -> str:
    """The policy review reads. A checkout in a temp dir (a clone in /tmp) runs the server
    and the venv's python from there, and the workspace is there too: review rightly calls
    that MCS102 and MCS104, and the policy a user would write for such a checkout says it
    is meant to be there, so what the demo shows is the server's own behaviour."""
    from mcpshim.shim.targets import temp_dirs

    checkout = HERE.parent
    if not any(checkout.is_relative_to(t) for t in map(Path, temp_dirs()) if t.is_absolute()):
        return POLICY
    return POLICY + "".join(
        f'\n[[ignore]]\nrule = "{rule}"\npath = {json.dumps(f"{checkout}/*")}\n'
        'reason = "this checkout (and its .demo-work) lives in a temp dir"\n'
        for rule in ("MCS102", "MCS104")
    )


def main(argv: list[str]) -> int:
    review_json = Path(argv[1]) if argv[:1] == ["--review-json"] and len(argv) == 2 else None
    if argv and review_json is None:
        print("usage: demo.py [--review-json FILE]", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="mcpshim-demo-", dir=work_base()) as tmp:
        home = Path(tmp)
        env = throwaway_env(home)
        mcpshim = [sys.executable, "-m", "mcpshim"]

        def show(*args: str, check: bool = False) -> None:
            print(f"\n$ mcpshim {shlex.join(args)}", flush=True)
            subprocess.run([*mcpshim, *args], env=env, check=check)

        show("install", *SHIMS, check=True)
        ws = _workspace(home, env)
        policy = home / "policy.toml"
        policy.write_text(demo_policy())
        run = [
            "run",
            "--mcp",
            "--on-exit",
            "terminate",
            "--grace",
            "1",
            "--",
            sys.executable,
            str(HERE / "mcp_demo_server.py"),
        ]
        print(
            f"\n# the MCP client config's command: mcpshim {shlex.join(run[:-3])} -- python3 "
            "mcp_demo_server.py"
        )
        params = StdioServerParameters(
            command=mcpshim[0], args=[*mcpshim[1:], *run], env=env, cwd=str(ws)
        )
        anyio.run(_agent, params)

        loc = Locations(home / ".local/share/mcpshim/shims", home / ".local/state/mcpshim/log")
        session = scope.latest_relayed(loc, [])
        assert session is not None
        show("tree", "--session", session)
        show("review", "--session", session, "--policy", str(policy), "--fail-on", "high")
        if review_json is not None:  # tests/e2e/test_demo.py reads what review said
            done = subprocess.run(
                [*mcpshim, "review", "--session", session, "--policy", str(policy),
                 "--format", "json", "--fail-on", "high"],
                env=env, capture_output=True, check=False,
            )  # fmt: skip
            review_json.write_bytes(done.stdout)
        show("report", "--session", session, "--policy", str(policy), "-o", str(REPORT))
        log = loc.log_file.read_bytes()
        print(f"\n# the report: {REPORT}")
        print(f"# the session's survivors were terminated; the log holds {len(log)} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
