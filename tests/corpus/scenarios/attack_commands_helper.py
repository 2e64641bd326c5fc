"""@agent-infra/mcp-server-commands (npm, pinned): a line that leaves a helper behind.

The agent runs a composed line that starts a copy of a helper from the checkout in the
background (`node tools/watch.js &`); it keeps running after the call answered, and
connects to a host it was told about. Under run_command: the process that outlived the
call (MCS501) and the session (MCS301), and its step to the network (MCS304).
"""

from __future__ import annotations

import shutil

from tests.corpus.harness import HERE, NO_CALL, Expect, Scenario, Workspace, git_repo
from tests.corpus.scenarios.benign_commands_server import server


def _setup(w: Workspace) -> None:
    git_repo(w)
    (w.ws / "tools").mkdir()
    shutil.copy(HERE / "tools" / "connect.js", w.ws / "tools" / "watch.js")


def _calls(w: Workspace) -> list[tuple[str, dict[str, object]]]:
    line = "git status --short; (node tools/watch.js watcher 0 500 >/dev/null 2>&1 &)"
    return [("run_command", {"command": line, "cwd": str(w.ws)})]


_EXPECTED = (
    Expect("MCS501", "medium", "run_command", names=("node",)),  # the detached helper
    Expect("MCS301", "medium", "run_command", names=("node",)),  # alive at the end
    Expect("MCS101", "info", "run_command", names=("git was found",)),
    Expect("MCS101", "info", "run_command", names=("node was found",)),
    Expect("MCS101", "info", NO_CALL, names=("node was found",)),  # the server's own node
    Expect("MCS504", "low", NO_CALL),  # the server's stdout lines that are not JSON-RPC
)
# The helper phones home half a second after the call answered, with no call in flight: the
# server's time between calls, in the process run_command started (its context says so).
_CONNECTED = ("127.0.0.1", "tools/call run_command")


def _proof(w: Workspace) -> list[str]:
    return [] if b"watcher" in b"".join(w.heard) else ["the helper never connected"]


SCENARIO = Scenario(
    name="attack-commands-background-helper",
    kind="attack",
    summary="mcp-server-commands 1.2.18: a composed line leaves a connecting helper behind",
    server=server,
    calls=_calls,
    setup=_setup,
    needs=("servers",),
    listener=True,
    linger=1.2,
    proof=_proof,
    expected=(
        *_EXPECTED,
        Expect("MCS304", "medium", NO_CALL, names=_CONNECTED),
        # the line is the command run_command was given: routine, each program on record
        Expect("MCS105", "low", "run_command", optional=True, names=("watch.js",)),  # sampled
        Expect("MCS405", "low", "run_command", optional=True, names=("sh",)),  # or its child's
    ),
    traced_expected=(
        *_EXPECTED,
        Expect("MCS306", "medium", NO_CALL, names=_CONNECTED),
        Expect("MCS401", "low", "run_command", names=("node tools/watch.js",)),
    ),
)
