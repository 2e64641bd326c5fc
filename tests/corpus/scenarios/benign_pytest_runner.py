"""mcp-pytest-runner 0.2.1 (PyPI, pinned, with pytest 9.2.0): an agent runs a project's
tests.

`discover_tests` runs `pytest --collect-only -q` and `execute_tests` runs `pytest -v`,
each found through PATH (the venv's bin, where a user's project venv puts pytest) in the
project. Collecting imports the project's test modules; running them runs their code.

True: the project's own code ran under each call (MEDIUM MCS107 naming the test file:
whoever edits the checkout chooses what runs; it is what the tool is for, and a lock
approves it once); a test runner is what a tests tool's name says (no MCS502). Untraced,
pytest has no shim: only the sampler may see it.
"""

from __future__ import annotations

import os
from typing import Any

from tests.corpus.harness import Expect, Scenario, Workspace, pyservers_installed
from tests.corpus.worlds import plant

TESTS = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    "pytest.ini": "[pytest]\naddopts = -p no:cacheprovider\n",
}


def server(w: Workspace) -> list[str]:
    return [str(pyservers_installed() / "mcp-pytest-runner")]


def server_env(w: Workspace) -> dict[str, str]:
    return {"PATH": f"{pyservers_installed()}:{os.environ.get('PATH', os.defpath)}"}


def _calls(w: Workspace) -> list[tuple[str, Any]]:
    return [("discover_tests", {}), ("execute_tests", {})]


def ran(file: str, optional: bool = False) -> tuple[Expect, ...]:
    """Under each call: the project's code ran; pytest (the venv's, a Python of pyenv's:
    outside the trusted directories) ran. Untraced pytest has no shim: only a sample sees
    it, then as the python it is, outside the trusted directories and with no shim."""
    out: tuple[Expect, ...] = ()
    for tool in ("discover_tests", "execute_tests"):
        out += (Expect("MCS107", "medium", tool, optional=optional, names=(file,)),)
        if optional:
            out += (Expect("MCS119", "low", tool, optional=True, names=("python",)),
                    Expect("MCS302", "info", tool, optional=True, names=("python",)))  # fmt: skip
        else:
            out += (Expect("MCS119", "low", tool, names=("pytest",)),)
    return out


SCENARIO = Scenario(
    name="benign-pytest-runner",
    kind="benign",
    summary="mcp-pytest-runner 0.2.1 + pytest 9.2.0: discover_tests, execute_tests",
    server=server,
    calls=_calls,
    setup=lambda w: plant(w, TESTS),
    server_env=server_env,
    needs=("pyservers",),
    run_options=("--trace-files",),  # traced: the file facts too (issue 40)
    expected=ran("test_calc.py", optional=True),  # sampled: pytest has no shim
    traced_expected=ran("test_calc.py"),
)
