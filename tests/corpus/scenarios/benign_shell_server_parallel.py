"""mcp-shell-server (PyPI, pinned) with parallel calls: an agent asks 12 repositories for their
git directory at once, 6 calls in flight, each `shell_execute` an argv list naming its own
checkout (`["git", "-C", "D/d3", "rev-parse", "--git-dir"]`).

Issue 37 item 6: every candidate call's argv shares "git", "-C" and "rev-parse", which name
no call; the one list item only one call holds, its directory, does. So each git is filed
under the call whose argv names its directory, in every reader, and none is "may have run".
"""

from __future__ import annotations

import subprocess

from tests.corpus.harness import Expect, Scenario, Workspace, pyservers_installed

N = 12


def _setup(w: Workspace) -> None:
    for i in range(N):
        d = w.ws / "D" / f"d{i}"
        d.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(d)], check=True, env=w.env)


def _server(w: Workspace) -> list[str]:
    return [str(pyservers_installed() / "mcp-shell-server")]


def _calls(w: Workspace) -> list[tuple[str, dict[str, object]]]:
    return [
        ("shell_execute",
         {"command": ["git", "-C", f"D/d{i}", "rev-parse", "--git-dir"], "directory": str(w.ws)})
        for i in range(N)
    ]  # fmt: skip


# The server starts each command with an environment of its own whose PATH lacks the shim
# dir (benign_shell_server.py): each git bypasses its shim, a true medium fact the trace
# shows, under the call whose argv names the git's directory (the n-th call: d<n-1>).
# Untraced only a sample that happens to catch a git can say it.
TRACED = tuple(
    Expect("MCS405", "medium", "shell_execute", names=("git", f"D/d{i} "), nth=i + 1)
    for i in range(N)
)
EXPECTED = tuple(Expect(e.rule, e.severity, e.tool, optional=True, names=e.names, nth=e.nth)
                 for e in TRACED)  # fmt: skip

SCENARIO = Scenario(
    name="benign-mcp-shell-server-parallel",
    kind="benign",
    summary=f"mcp-shell-server 1.1.14: {N} argv-list calls of git -C D/d<i>, 6 in flight",
    server=_server,
    calls=_calls,
    setup=_setup,
    server_env=lambda w: {"ALLOW_COMMANDS": "git"},
    needs=("pyservers",),
    expected=EXPECTED,
    traced_expected=TRACED,
    in_flight=6,
)
