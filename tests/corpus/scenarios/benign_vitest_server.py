"""@djankies/vitest-mcp (npm, pinned): an agent runs a project's tests with Vitest.

`set_project_root`, then `run_tests`: the server starts `npx vitest run` in the project,
which runs the project's tests in worker processes (node started with `--conditions
node`, a value, not a script). Running a project's own test runner is what the tool is
for; that npx runs project-defined code in a checkout the server can write is true and
said (MCS107).
"""

from __future__ import annotations

import json

from tests.corpus.harness import NO_CALL, Expect, Scenario, Workspace, servers_installed

SUM = "export const sum = (a, b) => a + b;\n"
TEST = """\
import { expect, test } from 'vitest';
import { sum } from './sum.js';
test('adds', () => { expect(sum(1, 2)).toBe(3); });
"""


def project(w: Workspace, test: str = TEST) -> None:
    """A small ES module project whose node_modules is the corpus's (vitest pinned there)."""
    pkg = {"name": "calc", "version": "1.0.0", "private": True, "type": "module",
           "scripts": {"test": "vitest run"}}  # fmt: skip
    (w.ws / "package.json").write_text(json.dumps(pkg, indent=2))
    (w.ws / "sum.js").write_text(SUM)
    (w.ws / "sum.test.js").write_text(test)
    (w.ws / "node_modules").symlink_to(servers_installed().parent)


COMMON = (
    Expect("MCS101", "info", NO_CALL, names=("node was found",)),  # the server's own node, its shim
    Expect("MCS101", "info", "run_tests", names=("node was found",)),  # node through its shim
    Expect("MCS101", "info", "run_tests", names=("sh was found",)),  # npx's sh through its shim
    Expect("MCS106", "info", "run_tests", names=("'vitest' run",)),  # npx's sh -c line
)
#: untraced, what sampling happens to catch of what no shim sees: npx running the project's
#: vitest, its workers (node re-running itself by absolute path), vitest's
#: `cat /proc/cpuinfo | ... | wc -l` lines, the sh that runs npx
SAMPLED = (
    Expect("MCS107", "medium", "run_tests", optional=True, names=("package.json",)),
    # a worker's parent is vitest's node, which the sampler saw too (parent_exe): node
    # running itself, as traced (a sample's bypass was "by absolute path", low, until the
    # sample named its parent's program)
    Expect("MCS405", "info", "run_tests", optional=True, names=("node running itself",)),
    Expect("MCS105", "low", "run_tests", optional=True, names=("/proc/cpuinfo",), count=2),
    Expect("MCS106", "info", "run_tests", optional=True, names=("npx vitest",)),
    Expect("MCS302", "info", "run_tests", optional=True, count=6),  # cat, grep, sort, uniq, wc
    Expect("MCS119", "low", "run_tests", optional=True, names=("node_modules/.bin/vitest",)),
)
TRACED = (
    # npx runs the project's vitest, which runs the project's test files: project code
    Expect("MCS107", "medium", "run_tests", names=("package.json",)),
    Expect("MCS405", "info", "run_tests", names=("node",)),  # vitest's workers: node itself
    # its two composed /proc/cpuinfo lines, past every shim: routine, each program on record
    Expect("MCS401", "low", "run_tests", names=("/proc/cpuinfo",), count=2),
    Expect("MCS401", "info", "run_tests", names=("npx vitest",)),  # the server's exec()
    Expect("MCS119", "low", "run_tests", names=("node_modules/.bin/vitest",)),
)


def server(w: Workspace) -> list[str]:
    return [str(servers_installed() / "vitest-mcp")]


def _calls(w: Workspace) -> list[tuple[str, dict[str, object]]]:
    return [
        ("set_project_root", {"path": str(w.ws)}),
        ("run_tests", {"target": "sum.test.js"}),
    ]


SCENARIO = Scenario(
    name="benign-vitest-mcp",
    kind="benign",
    summary="vitest-mcp 0.5.1 + vitest 2.1.9: set_project_root, run_tests",
    server=server,
    calls=_calls,
    setup=project,
    needs=("servers",),
    linger=0.5,
    expected=(*COMMON, *SAMPLED),
    traced_expected=(*COMMON, *TRACED),
)
