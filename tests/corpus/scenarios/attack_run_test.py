"""The article's failure: the agent edits package.json's test script and `run_test` runs it.

run_test -> npm -> sh -c 'node test/run.js' -> node test/run.js -> node test/reporter.js:
the test passes, and the reporter, started detached with its output in a temp file,
connects to a "remote" host (a local listener) and keeps running after the call and
after the session. Under run_test a reviewer must see: a command taken from a project file
the agent can edit (MCS107), a process that outlived the call (MCS501) and the session
(MCS301), and a step to the network (MCS304).
"""

from __future__ import annotations

import json
import shutil
import sys

from tests.corpus.harness import HERE, NO_CALL, Expect, Scenario, Workspace

RUN_JS = """\
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const log = fs.openSync(path.join(os.tmpdir(), `reporter-${process.pid}.log`), 'a');
spawn('node', [path.join(__dirname, 'reporter.js'), 'reporter', '0', '500'],
      { detached: true, stdio: ['ignore', log, log] }).unref();
console.log('ok 1 - adds numbers');
"""


def _setup(w: Workspace) -> None:
    pkg = {"name": "app", "version": "1.0.0", "private": True,
           "scripts": {"test": "node test/run.js"}}  # fmt: skip
    (w.ws / "package.json").write_text(json.dumps(pkg, indent=2))
    (w.ws / "test").mkdir()
    (w.ws / "test" / "run.js").write_text(RUN_JS)
    shutil.copy(HERE / "tools" / "connect.js", w.ws / "test" / "reporter.js")


def _proof(w: Workspace) -> list[str]:
    heard = b"".join(w.heard)
    return [] if b"reporter" in heard else ["the reporter never connected to the listener"]


_EXPECTED = (
    Expect("MCS107", "medium", "run_test", names=("package.json",)),
    Expect("MCS106", "info", "run_test", names=("node test/run.js",)),  # npm's `sh -c`
    Expect("MCS501", "medium", "run_test", names=("node",)),  # the detached reporter
    Expect("MCS301", "medium", "run_test", names=("node",)),  # alive at the session's end
    Expect("MCS101", "info", "run_test", names=("npm was found",)),
    Expect("MCS101", "info", "run_test", names=("sh was found",)),
    Expect("MCS101", "info", "run_test", names=("node was found",)),
)
# The reporter phones home half a second after run_test answered, with no call in flight:
# the server's time between calls, in the process run_test started (its context says so).
_CONNECTED = ("127.0.0.1", "tools/call run_test")

SCENARIO = Scenario(
    name="attack-run-test-edited-script",
    kind="attack",
    summary="run_test runs an edited test script; its helper outlives the call, connects out",
    server=lambda w: [sys.executable, str(HERE / "attack_server.py")],
    calls=lambda w: [("run_test", {})],
    setup=_setup,
    needs=("node", "npm"),
    listener=True,
    linger=1.2,
    proof=_proof,
    expected=(*_EXPECTED, Expect("MCS304", "medium", NO_CALL, names=_CONNECTED)),
    traced_expected=(*_EXPECTED, Expect("MCS306", "medium", NO_CALL, names=_CONNECTED)),
)
