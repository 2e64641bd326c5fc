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
    Expect("MCS101", "info", "git_log", optional=True),
    Expect("MCS101", "info", "search_todos", optional=True),
    Expect("MCS101", "info", "run_test", optional=True),
    Expect("MCS105", "medium", "search_todos"),
    Expect("MCS502", "low", "search_todos"),  # sh (and, traced or sampled, grep and head)
    # grep and head have no shim: true, and said when sampling catches them
    Expect("MCS302", "info", "search_todos", optional=True),
    Expect("MCS107", "medium", "run_test"),
    Expect("MCS106", "info", "run_test", optional=True),  # npm's `sh -c 'node ...'`
)

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
    expected=_EXPECTED,
    traced_expected=(
        *_EXPECTED,
        Expect("MCS401", "info", "run_test", optional=True),  # npm's `sh -c 'node test.js'`
    ),
)
