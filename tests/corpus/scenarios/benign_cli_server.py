"""cli-mcp-server 0.2.5 (PyPI, pinned): an allow-listed command server an agent reads a
repository with.

`run_command` takes a command line, checks its program and flags against ALLOWED_COMMANDS
and ALLOWED_FLAGS, and runs it in ALLOWED_DIR without a shell (`shlex.split`), the
program found through PATH.

True: git, under the two calls that ran it, was found through PATH and reached its pinned
shim (INFO MCS101); ls, cat and wc have no shim and are routine; the programs are the
ones the arguments name (no MCS502). Nothing here is worth a reviewer's decision.
"""

from __future__ import annotations

from typing import Any

from tests.corpus.harness import Expect, Scenario, Workspace, git_repo, pyservers_installed


def server(w: Workspace) -> list[str]:
    return [str(pyservers_installed() / "cli-mcp-server")]


def server_env(w: Workspace, commands: str = "ls,cat,git,wc") -> dict[str, str]:
    return {"ALLOWED_DIR": str(w.ws), "ALLOWED_COMMANDS": commands, "ALLOWED_FLAGS": "all"}


def _calls(w: Workspace) -> list[tuple[str, Any]]:
    return [
        ("run_command", {"command": "git status --short"}),
        ("run_command", {"command": "ls -la"}),
        ("run_command", {"command": "git log --oneline -2"}),
        ("run_command", {"command": "wc -l notes.txt"}),
    ]


SCENARIO = Scenario(
    name="benign-cli-mcp-server",
    kind="benign",
    summary="cli-mcp-server 0.2.5: git status, ls, git log, wc through run_command",
    server=server,
    calls=_calls,
    setup=git_repo,
    server_env=server_env,
    needs=("pyservers",),
    expected=(
        Expect("MCS101", "info", "run_command", nth=1, names=("git",)),
        Expect("MCS101", "info", "run_command", nth=3, names=("git",)),
        # ls and wc have no shim: said when the sampler catches them
        Expect("MCS302", "info", "run_command", optional=True, count=2),
    ),
)
