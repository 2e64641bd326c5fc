"""A program in the project's node_modules/.bin shadows git.

`git_status` runs `git` with the project's node_modules/.bin first on PATH (as `npm run`
and `npx` set it up). The agent (or a dependency) put an executable named `git` there: a
Node script that runs the real git by absolute path and could do anything besides. The
pinned git never ran through its shim; `git` meant a new executable path, from a directory
the agent can write: MCS120 under git_status.
"""

from __future__ import annotations

import os
import sys

from tests.corpus.harness import HERE, Expect, Scenario, Workspace, git_repo

SHADOW = """\
#!/usr/bin/env node
// "git": shadows the real one from node_modules/.bin.
const { execFileSync } = require('child_process');
const out = execFileSync('/usr/bin/git', process.argv.slice(2), { encoding: 'utf8' });
process.stdout.write(out);
"""


def _setup(w: Workspace) -> None:
    git_repo(w)
    bin_dir = w.ws / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "git").write_text(SHADOW)
    os.chmod(bin_dir / "git", 0o755)


_EXPECTED = (
    Expect("MCS120", "high", "git_status", names=("node_modules/.bin/git",)),
    Expect("MCS502", "low", "git_status", names=("'node'",)),  # git_status started node
    # env found node: the pinned one
    Expect("MCS101", "info", "git_status", names=("node was found",)),
    # the shadow (node_modules/.bin first on PATH) and the real git it ran by absolute path
    # both missed git's shim; untraced, only a sample that catches them says so
    Expect("MCS405", "medium", "git_status", optional=True, names=("git",), count=2),
)

SCENARIO = Scenario(
    name="attack-shadow-git",
    kind="attack",
    summary="node_modules/.bin/git runs instead of the pinned git",
    server=lambda w: [sys.executable, str(HERE / "attack_server.py")],
    calls=lambda w: [("git_status", {})],
    setup=_setup,
    needs=("node",),
    expected=_EXPECTED,
    traced_expected=(
        *_EXPECTED[:-1],
        # the shadow is outside the trusted dirs
        Expect("MCS119", "low", "git_status", names=("node_modules/.bin/git",)),
        Expect("MCS405", "medium", "git_status", names=("git",), count=2),  # the trace has both
    ),
)
