"""@djankies/vitest-mcp (npm, pinned): an agent runs a project's tests with Vitest.

`set_project_root`, then `run_tests`: the server starts `npx vitest run` in the project,
which runs the project's tests in worker processes (node started with `--conditions
node`, a value, not a script). Running a project's own test runner is what the tool is
for; that npx runs project-defined code in a checkout the server can write is true and
said (MCS107).
"""

from __future__ import annotations

import json

from tests.corpus.harness import ANY_CALL, NO_CALL, Expect, Scenario, Workspace, servers_installed

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
    Expect("MCS101", "info", ANY_CALL, optional=True),
    Expect("MCS101", "info", NO_CALL, optional=True),
    Expect("MCS106", "info", "run_tests", optional=True),  # npx's `sh -c 'vitest run ...'`
    Expect("MCS119", "low", "run_tests", optional=True),  # node_modules/.bin/vitest
)
#: untraced, what sampling happens to catch: npx running the project's vitest, its workers
#: started by absolute path, vitest's `cat /proc/cpuinfo | ... | wc -l` shell lines
SAMPLED = (
    Expect("MCS107", "medium", "run_tests", optional=True),
    Expect("MCS405", "medium", "run_tests", optional=True),
    Expect("MCS105", "medium", "run_tests", optional=True),
    Expect("MCS302", "info", "run_tests", optional=True),
)
TRACED = (
    Expect("MCS107", "medium", "run_tests"),  # npx runs the project's vitest and its tests
    Expect("MCS405", "medium", "run_tests"),  # vitest's workers: node by absolute path
    Expect("MCS401", "medium", "run_tests"),  # its composed /proc/cpuinfo lines, past shims
    Expect("MCS401", "info", "run_tests", optional=True),  # npx's sh -c 'vitest run'
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
