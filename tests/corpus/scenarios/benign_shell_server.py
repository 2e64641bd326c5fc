"""mcp-shell-server (PyPI, pinned): an allow-listed shell server an agent reads a repository with.

`shell_execute` takes an argv (no shell) and runs it only when its executable is on the
ALLOW_COMMANDS list. Everything here is routine reading: git through its pinned shim,
coreutils, the server's own Python.
"""

from __future__ import annotations

from tests.corpus.harness import (
    ANY_CALL,
    NO_CALL,
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


EXPECTED = (
    Expect("MCS101", "info", ANY_CALL, optional=True),
    Expect("MCS101", "info", NO_CALL, optional=True),
    # the server starts each command with an environment of its own whose PATH lacks the
    # shim dir: git bypasses its shim (true: the trace says so; sampling, if it catches it)
    Expect("MCS405", "medium", ANY_CALL, optional=True),
)
TRACED = (*EXPECTED[:2], Expect("MCS405", "medium", ANY_CALL))

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
