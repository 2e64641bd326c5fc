"""The project's first fixture server (tests/fixtures/mcp_server.py, official `mcp` SDK).

`git_version` runs `git --version` through PATH (the pinned shim); `session_id` starts
nothing. Routine: at most an info line that git was found through PATH and ran its pin.
"""

from __future__ import annotations

import sys

from tests.corpus.harness import REPO, Expect, Scenario

SCENARIO = Scenario(
    name="benign-fixture-mcp-server",
    kind="benign",
    summary="tests/fixtures/mcp_server.py: git_version, session_id",
    server=lambda w: [sys.executable, str(REPO / "tests/fixtures/mcp_server.py")],
    calls=lambda w: [("git_version", {}), ("session_id", {}), ("git_version", {})],
    shims=("git",),
    expected=(
        Expect("MCS101", "info", "git_version", names=("git was found",), nth=1),
        Expect("MCS101", "info", "git_version", names=("git was found",), nth=2),
    ),
)
