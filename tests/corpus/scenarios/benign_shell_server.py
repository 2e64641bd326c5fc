"""mcp-shell-server (PyPI, pinned): an allow-listed shell server an agent reads a repository with.

`shell_execute` takes an argv (no shell) and runs it only when its executable is on the
ALLOW_COMMANDS list. Everything here is routine reading: git through its pinned shim,
coreutils, the server's own Python.
"""

from __future__ import annotations

from tests.corpus.harness import (
    Expect,
    Scenario,
    Workspace,
    git_repo,
    pyservers_installed,
)


def _server(w: Workspace) -> list[str]:
    return [str(pyservers_installed() / "mcp-shell-server")]


def _calls(w: Workspace) -> list[tuple[str, dict[str, object]]]:
    d = str(w.ws)
    return [
        ("shell_execute", {"command": ["git", "status", "--short"], "directory": d}),
        ("shell_execute", {"command": ["git", "log", "--oneline", "-3"], "directory": d}),
        ("shell_execute", {"command": ["ls", "-la"], "directory": d}),
        ("shell_execute", {"command": ["cat", "README.md"], "directory": d}),
        ("shell_execute", {"command": ["wc", "-l", "notes.txt"], "directory": d}),
    ]


# The server starts each command with an environment of its own whose PATH lacks the shim
# dir: both gits bypass their shim, a true medium fact of a benign server (the trace says so;
# untraced, only a sample that happens to catch a git)
EXPECTED = tuple(
    Expect("MCS405", "medium", "shell_execute", names=("git",), nth=n, optional=True)
    for n in (1, 2)
)
TRACED = tuple(Expect("MCS405", "medium", "shell_execute", names=("git",), nth=n) for n in (1, 2))

SCENARIO = Scenario(
    name="benign-mcp-shell-server",
    kind="benign",
    summary="mcp-shell-server 1.1.14: git status/log, ls, cat, wc through shell_execute",
    server=_server,
    calls=_calls,
    setup=git_repo,
    server_env=lambda w: {"ALLOW_COMMANDS": "git,ls,cat,wc"},
    needs=("pyservers",),
    expected=EXPECTED,
    traced_expected=TRACED,
)
