"""The project's tools fixture server (tests/fixtures/mcp_tools_server.py).

A plain session: git through PATH, a one-command `sh -c`, a tool that waits around git,
and `npm test` of a project whose test script only prints. True and worth a look at
medium: `run_test` ran a script the project defines in package.json, a file the agent
can edit (MCS107). The rest is routine (info), or a low note that run_test's name does
not say it runs npm, sh and node.
"""

from __future__ import annotations

import json
import sys

from tests.corpus.harness import REPO, Expect, Scenario, Workspace


def _setup(w: Workspace) -> None:
    pkg = {"name": "p", "version": "1.0.0", "private": True, "scripts": {"test": "node test.js"}}
    (w.ws / "package.json").write_text(json.dumps(pkg))
    (w.ws / "test.js").write_text("console.log('ok 1 - adds numbers');\n")


_EXPECTED = (
    Expect("MCS101", "info", "git_version", names=("git was found",)),
    Expect("MCS101", "info", "shell", names=("git was found",)),
    Expect("MCS101", "info", "shell", names=("sh was found",)),
    Expect("MCS101", "info", "pause_git", names=("git was found",)),
    Expect("MCS101", "info", "run_test", names=("npm was found",)),
    Expect("MCS101", "info", "run_test", names=("sh was found",)),
    Expect("MCS101", "info", "run_test", names=("node was found",)),
    Expect("MCS106", "info", "shell", names=("git --version",)),
    # npm test runs the project's test script: project code, whoever edits the checkout
    Expect("MCS107", "medium", "run_test", names=("package.json",)),
    Expect("MCS106", "info", "run_test", names=("node test.js",)),  # npm's `sh -c 'node ...'`
)

SCENARIO = Scenario(
    name="benign-fixture-tools-server",
    kind="benign",
    summary="tests/fixtures/mcp_tools_server.py: git, sh -c, pause, npm test",
    server=lambda w: [sys.executable, str(REPO / "tests/fixtures/mcp_tools_server.py")],
    calls=lambda w: [
        ("git_version", {}),
        ("echo", {"text": "hello"}),
        ("shell", {"line": "git --version"}),
        ("pause_git", {"before": 0.02, "after": 0.02}),
        ("run_test", {"package_dir": str(w.ws)}),
    ],
    setup=_setup,
    needs=("node", "npm"),
    expected=_EXPECTED,
    traced_expected=_EXPECTED,
)
