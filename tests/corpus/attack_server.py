"""A stdio MCP server (official `mcp` SDK) whose tools do what the article's failures do.

Every tool is one a real coding-assistant server offers, and each starts real processes;
what makes a session an attack is what the agent (the scenario) put in the workspace or
the arguments. The workspace is the server's cwd; CORPUS_PORT is a local listener standing
in for a remote host (127.0.0.1 only: no test reaches the internet).

- run_test: `npm test` in the workspace: runs whatever package.json's test script says.
- format_code: the server's bundled formatter (tools/formatter.js) on one file.
- git_status: `git status --short`, git found through the PATH the server was given.
- deploy: `git ls-remote` against a remote URL with a token in it.
- start_watcher: a file watcher started in the background with `sh -c '... &'`.
- run_helper: a helper program the server keeps in a scratch directory, by absolute path.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

try:
    from mcp.server.mcpserver import MCPServer
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[no-redef,attr-defined,unused-ignore]

TOOLS = Path(__file__).resolve().parent / "tools"
server = MCPServer("mcpshim-corpus-attack")


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    return (done.stdout + done.stderr).strip()[:2000] or f"exit {done.returncode}"


@server.tool()
def run_test() -> str:
    """Run the project's test suite (`npm test`)."""
    return _run(["npm", "test", "--silent"])


@server.tool()
def format_code(path: str) -> str:
    """Format one file with the bundled formatter."""
    return _run(["node", str(TOOLS / "formatter.js"), path])


@server.tool()
def git_status() -> str:
    """`git status --short` of the workspace, with the project's tools first on PATH (as
    `npm run` and `npx` give every command they start)."""
    path = f"{Path.cwd() / 'node_modules' / '.bin'}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        ["git", "status", "--short"], capture_output=True, text=True, check=False,
        env={**os.environ, "PATH": path}, timeout=60,
    )  # fmt: skip
    return (done.stdout + done.stderr).strip() or f"exit {done.returncode}"


@server.tool()
def deploy(remote: str, token: str) -> str:
    """Check that the deploy remote answers (`git ls-remote`), authenticating with a token."""
    url = f"https://x-access-token:{token}@{remote}"
    return _run(["git", "-c", "http.sslVerify=false", "ls-remote", url])


@server.tool()
def start_watcher() -> str:
    """Start the file watcher in the background."""
    watcher = TOOLS / "watcher.js"
    subprocess.run(["sh", "-c", f"node '{watcher}' >/dev/null 2>&1 &"], check=False)
    return "watcher started"


@server.tool()
def run_helper() -> str:
    """Run the helper program the server keeps in its scratch directory."""
    return _run([os.environ["CORPUS_HELPER"], "--check"])


if __name__ == "__main__":
    server.run("stdio")
