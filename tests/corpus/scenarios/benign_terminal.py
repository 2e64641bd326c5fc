"""terminal-mcp 0.4.7 (PyPI, pinned): an agent works in a persistent bash terminal.

`session_create {"command": "bash"}` starts bash on a PTY (pexpect; the shell leads its own
terminal session, as every PTY shell does) and keeps it between calls; `session_interact`
types a line into it and reads the answer until a marker the line prints last (`wait_for`),
so what the line runs starts and ends inside that call; `session_close` ends bash. The
session id is the server's (a uuid), read from session_create's answer as an agent does.

True: bash is a helper the server keeps (the server's own child, alive between calls, gone
in session_close): INFO MCS501 once for the server, never a finding per call; session_create
started the bash its arguments name (no MCS502). `git status` in the terminal finds git
through PATH and reaches its pinned shim (the server passes its PATH on to bash): INFO
MCS101 under the session_interact that typed it; ls and wc have no shim and are routine.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.corpus.harness import NO_CALL, Expect, Scenario, Workspace, git_repo, pyservers_installed


def server(w: Workspace) -> list[str]:
    return [str(pyservers_installed() / "terminal-mcp")]


def typed(line: str) -> Callable[[list[str]], dict[str, Any]]:
    """session_interact's arguments: the line, into the terminal session_create opened."""

    def args(answers: list[str]) -> dict[str, Any]:
        found = re.search(r'"session_id":\s*"([^"]+)"', answers[0])
        sid = found.group(1) if found else "?"
        # the answer comes when bash has said ok-42 (its echo of the line says ok-$((6*7))):
        # the line's programs have ended by then
        return {"session_id": sid, "input": f'{line}; echo "ok-$((6*7))"', "wait_for": "ok-42",
                "timeout": 20}  # fmt: skip

    return args


def close(answers: list[str]) -> dict[str, Any]:
    return {"session_id": typed("")(answers)["session_id"]}


CREATE = ("session_create", {"command": "bash", "label": "work"})


def _calls(w: Workspace) -> list[tuple[str, Any]]:
    return [
        CREATE,
        ("session_interact", typed("git status --short")),
        ("session_interact", typed("ls")),
        ("session_interact", typed("wc -l notes.txt")),
        ("session_close", close),
    ]


KEPT = Expect("MCS501", "info", NO_CALL, names=("bash",))  # the terminal, kept
# terminal-mcp runs bash by absolute path: untraced, only a sample sees it
SAMPLED_BASH = Expect("MCS302", "info", "session_create", optional=True, names=("bash",))

SCENARIO = Scenario(
    name="benign-terminal-mcp",
    kind="benign",
    summary="terminal-mcp 0.4.7: bash kept between calls; git status, ls, wc typed into it",
    server=server,
    calls=_calls,
    setup=git_repo,
    needs=("pyservers",),
    run_options=("--trace-files",),  # traced: the file facts too (issue 40)
    expected=(
        Expect("MCS101", "info", "session_interact", nth=1, names=("git",)),
        Expect("MCS501", "info", NO_CALL, optional=True, names=("bash",)),  # sampled
        SAMPLED_BASH,
    ),
    traced_expected=(Expect("MCS101", "info", "session_interact", nth=1, names=("git",)), KEPT),
)
