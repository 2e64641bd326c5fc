"""A small MCP server for the demonstration, written with the official `mcp` Python SDK.

Three tools that do what real coding-assistant servers do: read the git history, search
the workspace with a composed shell line, and run the project's tests through npm. Each
starts programs through PATH, so the shims mcpshim put first on PATH see them.
"""

from __future__ import annotations

import subprocess

try:
    from mcp.server.mcpserver import MCPServer
except ImportError:  # mcp 1.x calls it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[no-redef,attr-defined,unused-ignore]

server = MCPServer("mcpshim-demo")


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return (done.stdout + done.stderr).strip()


@server.tool()
def git_log(count: int = 3) -> str:
    """The last commits of the workspace (`git log --oneline`)."""
    return _run(["git", "log", "--oneline", f"-{count}"])


@server.tool()
def search_todos(word: str = "TODO") -> str:
    """Find a word in the workspace's files (a composed `sh -c` pipeline)."""
    return _run(["sh", "-c", f"grep -rn '{word}' --include='*.js' . | head -5"])


@server.tool()
def run_test() -> str:
    """Run the project's test suite (`npm test`)."""
    return _run(["npm", "test", "--silent"])


if __name__ == "__main__":
    server.run("stdio")
