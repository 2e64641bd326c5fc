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
    Expect("MCS101", "info", ANY_CALL, optional=True),
    Expect("MCS101", "info", NO_CALL, optional=True),
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
        # sampling may catch the shells: their lines are said (one command: info)
        Expect("MCS105", "medium", "run_command", optional=True),
        Expect("MCS106", "info", "run_command", optional=True),
        # a shell the sampler missed: its child's record shows it ran past sh's shim
        Expect("MCS405", "medium", "run_command", optional=True),
    ),
    traced_expected=(
        *COMMON,
        Expect("MCS401", "medium", "run_command"),  # `&&` and `|` lines, past every shim
        Expect("MCS401", "info", "run_command"),  # `git status --short`, one command
    ),
)
