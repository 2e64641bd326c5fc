"""@agent-infra/mcp-server-commands (npm, pinned): `run_command` composes shell lines.

The server hands each command to Node's child_process.exec, i.e. `/bin/sh -c LINE` by
absolute path (no shim sees the shell; the trace does, and the shims see what it runs).
The agent reads the repository with a few composed lines.
"""

from __future__ import annotations

from tests.corpus.harness import (
    ANY_CALL,
    NO_CALL,
    Expect,
    Scenario,
    Workspace,
    git_repo,
    servers_installed,
)

COMMON = (
    Expect("MCS101", "info", NO_CALL, names=("node was found",)),  # the server's own node, its shim
    Expect("MCS101", "info", "run_command", names=("git was found",), nth=1),
    Expect("MCS101", "info", "run_command", names=("git was found",), nth=2),
    # the server writes lines that are not JSON-RPC to its stdout (true: the client's SDK
    # complains of each)
    Expect("MCS504", "low", NO_CALL),
)


def server(w: Workspace) -> list[str]:
    return [str(servers_installed() / "mcp-server-commands")]


def _calls(w: Workspace) -> list[tuple[str, dict[str, object]]]:
    d = str(w.ws)
    return [
        ("run_command", {"command": "git status --short", "cwd": d}),
        ("run_command", {"command": "git log --oneline -3 && git diff --stat", "cwd": d}),
        ("run_command", {"command": "ls -la | head -5", "cwd": d}),
    ]


SCENARIO = Scenario(
    name="benign-mcp-server-commands",
    kind="benign",
    summary="mcp-server-commands 1.2.18: git status, git log && git diff, ls | head",
    server=server,
    calls=_calls,
    setup=git_repo,
    needs=("servers",),
    expected=(
        *COMMON,
        # sampling may catch the shells: their lines are said (one command: info; composed:
        # low, each program is on record)
        Expect("MCS106", "info", "run_command", nth=1, optional=True, names=("git status",)),
        Expect("MCS105", "low", "run_command", nth=2, optional=True, names=("git log",)),
        Expect("MCS105", "low", "run_command", nth=3, optional=True, names=("ls -la",)),
        # a shell the sampler missed: its child's record shows it ran past sh's shim
        Expect("MCS405", "low", ANY_CALL, optional=True, names=("sh ran",), count=3),
        # ls and head have no shim: said when the sampler catches them
        Expect("MCS302", "info", "run_command", nth=3, optional=True, count=2),
    ),
    traced_expected=(
        *COMMON,
        Expect("MCS401", "info", "run_command", nth=1, names=("git status --short",)),
        Expect("MCS401", "low", "run_command", nth=2, names=("git log --oneline -3 &&",)),
        Expect("MCS401", "low", "run_command", nth=3, names=("ls -la | head -5",)),
    ),
)
