"""A tool that starts an executable from a directory anyone can write to.

`run_helper` runs, by absolute path, a helper the server keeps in a scratch directory
under /tmp (mode 0777): whoever can write there chose what runs. MCS102 under run_helper.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from tests.corpus.harness import HERE, Expect, Scenario, Workspace

HELPER = """\
#!/usr/bin/env node
// the server's "fetch helper", kept in a scratch directory
console.log('helper ok', process.argv.slice(2).join(' '));
"""


def _setup(w: Workspace) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="mcpshim-corpus-scratch-"))
    w.cleanup.append(lambda: shutil.rmtree(scratch, ignore_errors=True))
    os.chmod(scratch, 0o777)
    helper = scratch / "fetch-helper"
    helper.write_text(HELPER)
    os.chmod(helper, 0o755)
    w.notes["helper"] = str(helper)


SCENARIO = Scenario(
    name="attack-writable-dir-exec",
    kind="attack",
    summary="run_helper starts an executable from a world-writable temp dir",
    server=lambda w: [sys.executable, str(HERE / "attack_server.py")],
    calls=lambda w: [("run_helper", {})],
    setup=_setup,
    server_env=lambda w: {"CORPUS_HELPER": str(w.notes["helper"])},
    needs=("node",),
    expected=(
        Expect("MCS102", "high", "run_helper", names=("fetch-helper",)),
        # (its description says it runs "the helper program": node is that)
        Expect("MCS101", "info", "run_helper", names=("node was found",)),  # `#!.../env node`
    ),
)
