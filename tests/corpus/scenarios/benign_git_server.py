"""@cyanheads/git-mcp-server (npm, pinned): read-only repository calls an agent makes.

It runs bare `git` through PATH (cross-spawn, no shell) for each tool. Everything it does
is routine: a pinned git reached through PATH, git's own helpers. Nothing here is worth a
reviewer's attention at medium or above.
"""

from __future__ import annotations

from tests.corpus.harness import (
    NO_CALL,
    Expect,
    Scenario,
    Workspace,
    git_repo,
    servers_installed,
)


def _server(w: Workspace) -> list[str]:
    return [str(servers_installed() / "git-mcp-server")]


TOOLS = ("git_set_working_dir", "git_status", "git_log", "git_diff", "git_branch", "git_show")


def _calls(w: Workspace) -> list[tuple[str, dict[str, object]]]:
    return [
        ("git_set_working_dir", {"path": str(w.ws)}),
        ("git_status", {}),
        ("git_log", {"maxCount": 5, "oneline": True}),
        ("git_diff", {"stat": True}),
        ("git_branch", {"mode": "list"}),
        ("git_show", {"object": "HEAD", "stat": True}),
    ]


SCENARIO = Scenario(
    name="benign-git-mcp-server",
    kind="benign",
    summary="git-mcp-server 2.15.3: status, log, diff, branch, show",
    server=_server,
    calls=_calls,
    setup=git_repo,
    server_env=lambda w: {
        "MCP_TRANSPORT_TYPE": "stdio",
        "MCP_LOG_LEVEL": "warning",
        "GIT_SIGN_COMMITS": "false",
    },
    needs=("servers",),
    # the server starts as `#!/usr/bin/env node`: env finds node through PATH, the pinned one
    # the server is started as `node ...` through PATH, and each tool's git: the pinned ones
    expected=(
        Expect("MCS101", "info", NO_CALL, names=("node was found",)),
        *(Expect("MCS101", "info", tool, names=("git was found",)) for tool in TOOLS),
    ),
)
