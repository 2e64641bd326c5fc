"""The demonstration server (examples/mcp_demo_server.py) on a plain project.

`git_log` is routine. `search_todos` composes a shell line from its argument
(`sh -c "grep -rn 'WORD' ... | head -5"`): true and worth a look (MCS105, medium).
`run_test` runs package.json's test script, a file the agent can edit (MCS107, medium);
the test script here only prints, so nothing outlives the call.
"""

from __future__ import annotations

import json
import sys

from tests.corpus.harness import REPO, Expect, Scenario, Workspace, git_repo


def _setup(w: Workspace) -> None:
    pkg = {"name": "demo", "version": "1.0.0", "private": True, "scripts": {"test": "node test.js"}}
    git_repo(w, {"package.json": json.dumps(pkg), "test.js": "console.log('ok 1');\n",
                 "index.js": "// TODO: handle errors\nmodule.exports = 1;\n"})  # fmt: skip


_EXPECTED = (
    Expect("MCS101", "info", "git_log", names=("git was found",)),
    Expect("MCS101", "info", "search_todos", names=("sh was found",)),
    Expect("MCS101", "info", "run_test", names=("npm was found",)),
    Expect("MCS101", "info", "run_test", names=("sh was found",)),
    Expect("MCS101", "info", "run_test", names=("node was found",)),
    # a shell line composed from the call's argument: quoting decides what the word becomes
    Expect("MCS105", "medium", "search_todos", names=("grep -rn 'TODO'",)),
    Expect("MCS502", "low", "search_todos", names=("'sh'",)),  # a search does not say sh
    # npm test runs the project's test script: project code, whoever edits the checkout
    Expect("MCS107", "medium", "run_test", names=("package.json",)),
    Expect("MCS106", "info", "run_test", names=("node test.js",)),  # npm's `sh -c 'node ...'`
)
# grep and head have no shim, and are the line's programs (said by the line's finding)

SCENARIO = Scenario(
    name="benign-demo-server",
    kind="benign",
    summary="examples/mcp_demo_server.py: git log, a composed grep line, npm test",
    server=lambda w: [sys.executable, str(REPO / "examples/mcp_demo_server.py")],
    calls=lambda w: [
        ("git_log", {"count": 3}),
        ("search_todos", {"word": "TODO"}),
        ("run_test", {}),
    ],
    setup=_setup,
    needs=("node", "npm"),
    # untraced: said when the sampler catches them
    expected=(*_EXPECTED, Expect("MCS302", "info", "search_todos", optional=True, count=2)),
    traced_expected=_EXPECTED,
)
