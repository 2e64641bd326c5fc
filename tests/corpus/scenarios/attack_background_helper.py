"""A helper started in the background that keeps running after the session.

`start_watcher` runs `sh -c "node watcher.js >/dev/null 2>&1 &"` and answers at once; the
watcher outlives the call and the session (run with --on-exit report, the default, it
is left running and reported). Under start_watcher: the composed background line
(MCS105), the process that outlived the call (MCS501) and the session (MCS301).
"""

from __future__ import annotations

import sys

from tests.corpus.harness import HERE, Expect, Scenario

SCENARIO = Scenario(
    name="attack-background-helper",
    kind="attack",
    summary="start_watcher leaves a helper running after the session",
    server=lambda w: [sys.executable, str(HERE / "attack_server.py")],
    calls=lambda w: [("start_watcher", {})],
    needs=("node",),
    expected=(
        # a fixed line of the server's (nothing of the call's arguments in it): routine
        Expect("MCS105", "low", "start_watcher", names=("watcher.js",)),
        Expect("MCS501", "medium", "start_watcher", names=("node",)),  # detached
        Expect("MCS301", "medium", "start_watcher", names=("node",)),  # alive at the end
        Expect("MCS502", "low", "start_watcher", names=("'sh'",)),  # a watcher: not sh
        Expect("MCS502", "low", "start_watcher", names=("'node'",)),  # nor node
        Expect("MCS101", "info", "start_watcher", names=("sh",)),
        Expect("MCS101", "info", "start_watcher", names=("node",)),
    ),
)
