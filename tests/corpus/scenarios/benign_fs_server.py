"""@modelcontextprotocol/server-filesystem (npm, pinned): reads an agent makes.

The server does its work in Node's own file APIs and starts no process: the only exec is
its own start (`#!/usr/bin/env node`, which finds node through PATH). Nothing to review.
"""

from __future__ import annotations

from tests.corpus.harness import NO_CALL, Expect, Scenario, Workspace, git_repo, servers_installed


def _server(w: Workspace) -> list[str]:
    return [str(servers_installed() / "mcp-server-filesystem"), str(w.ws)]


def _calls(w: Workspace) -> list[tuple[str, dict[str, object]]]:
    return [
        ("list_allowed_directories", {}),
        ("list_directory", {"path": str(w.ws)}),
        ("read_text_file", {"path": str(w.ws / "README.md")}),
        ("read_text_file", {"path": str(w.ws / "notes.txt"), "head": 1}),
        ("get_file_info", {"path": str(w.ws / "notes.txt")}),
        ("search_files", {"path": str(w.ws), "pattern": "*.txt"}),
    ]


SCENARIO = Scenario(
    name="benign-server-filesystem",
    kind="benign",
    summary="server-filesystem 2026.8.31: list, read, stat, search",
    server=_server,
    calls=_calls,
    setup=git_repo,
    needs=("servers",),
    # the server starts as `#!/usr/bin/env node`: env finds node through PATH, the pinned one
    expected=(Expect("MCS101", "info", NO_CALL, names=("node was found",)),),
)
