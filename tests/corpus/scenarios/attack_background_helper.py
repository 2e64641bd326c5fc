"""A helper started in the background that keeps running after the session.

`start_watcher` runs `sh -c "node watcher.js >/dev/null 2>&1 &"` and answers at once; the
watcher outlives the call and the session (run with --on-exit report, the default, it
is left running and reported). Under start_watcher: the composed background line
(MCS105), the process that outlived the call (MCS501) and the session (MCS301).
"""

from __future__ import annotations

import sys

from tests.corpus.harness import HERE, Expect, Scenario

_EXPECTED = (
    # a fixed line of the server's (nothing of the call's arguments in it): routine
    Expect("MCS105", "low", "start_watcher", names=("watcher.js",)),
    Expect("MCS501", "medium", "start_watcher", names=("node",)),  # detached
    Expect("MCS301", "medium", "start_watcher", names=("node",)),  # alive at the end
    # a watcher is not sh (node is the line's program: the line says it)
    Expect("MCS502", "low", "start_watcher", names=("'sh'",)),
    Expect("MCS101", "info", "start_watcher", names=("sh was found",)),
    Expect("MCS101", "info", "start_watcher", names=("node was found",)),
)
# untraced, when sh exits before node's shim reads its parent (a race no trace settles
# there), node hangs under the subreaper and is judged on its own
_RACE = Expect("MCS502", "low", "start_watcher", names=("'node'",), optional=True)

SCENARIO = Scenario(
    name="attack-background-helper",
    kind="attack",
    summary="start_watcher leaves a helper running after the session",
    server=lambda w: [sys.executable, str(HERE / "attack_server.py")],
    calls=lambda w: [("start_watcher", {})],
    needs=("node",),
    expected=(*_EXPECTED, _RACE),
    traced_expected=_EXPECTED,
)
