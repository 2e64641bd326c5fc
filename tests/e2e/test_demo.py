"""`make demo` says what it means to show: the helper its test script plants, at medium or
above, and nothing else (issue 27 item 10). Runs examples/demo.py as `make demo` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.home import REPO, home_env

#: the planted chain: run_test runs `npm test`, whose script runs node test.js, which leaves
#: `sleep 30` behind
PLANTED_CALL = "run_test"
HELPER = "sleep"
ORDER = ("info", "low", "medium", "high")


def test_the_demo_shows_the_planted_helper_and_nothing_else_at_medium(tmp_path: Path) -> None:
    out = tmp_path / "review.json"
    user = tmp_path / "user-home"  # the HOME and XDG dirs of whoever runs `make demo`
    user.mkdir()
    env = {**os.environ, **home_env(user)}
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "demo.py"), "--review-json", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(user.iterdir()) == []  # its HOME and every XDG dir were throwaway ones
    assert (tmp_path / "artifacts" / "demo-report.html").is_file()
    doc = json.loads(out.read_text())
    assert doc["schema"] == "mcpshim.findings/1"
    loud = [f for f in doc["findings"] if ORDER.index(f["severity"]) >= ORDER.index("medium")]
    assert not [f for f in loud if f["severity"] == "high"], loud
    # each is about the call that plants the helper, with the evidence of that call's own
    assert loud and all(f["call"]["name"] == PLANTED_CALL for f in loud), loud
    assert all(e.get("tool", PLANTED_CALL) == PLANTED_CALL for f in loud for e in f["evidence"])
    helper = [f for f in loud if any(e["command"] == HELPER for e in f["evidence"])]
    assert {f["rule"] for f in helper} >= {"MCS501", "MCS502"}, loud
    # the evidence names what ran (the helper's exec), not the PATH search's failed step
    for f in helper:
        assert all(e["path"] == "/usr/bin/sleep" for e in f["evidence"]), f
    # nothing said twice about one exec (a search step that led to a shim is no program of
    # its own: it said "sh started by absolute path" beside the shim's own sh); npm's process
    # runs npm, then node (its #!/usr/bin/env node), each through its shim: two execs
    said = [(f["rule"], e["pid"], e["command"])
            for f in doc["findings"] for e in f["evidence"] if "pid" in e]  # fmt: skip
    assert len(said) == len(set(said)), said
