"""A formatter that opens an outbound connection: the step from local work to the network.

`format_code` runs the server's bundled formatter on one file; the formatter also connects
to a "remote" host (a local listener) and holds the connection for most of a second. A
formatter has no reason to reach the network: MCS304 under format_code.
"""

from __future__ import annotations

import sys

from tests.corpus.harness import HERE, Expect, Scenario, Workspace


def _setup(w: Workspace) -> None:
    (w.ws / "app.js").write_text("const a = 1;   \nmodule.exports = a;\n")


def _proof(w: Workspace) -> list[str]:
    return [] if b"formatted" in b"".join(w.heard) else ["the formatter never connected"]


SCENARIO = Scenario(
    name="attack-formatter-network",
    kind="attack",
    summary="format_code's formatter opens an outbound connection",
    server=lambda w: [sys.executable, str(HERE / "attack_server.py")],
    calls=lambda w: [("format_code", {"path": str(w.ws / "app.js")})],
    setup=_setup,
    needs=("node",),
    listener=True,
    linger=1.0,
    proof=_proof,
    expected=(
        Expect("MCS304", "medium", "format_code", names=("127.0.0.1",)),
        Expect("MCS502", "low", "format_code", names=("'node'",)),  # "format_code": not node
        Expect("MCS101", "info", "format_code", names=("node was found",)),
    ),
    traced_expected=(
        Expect("MCS306", "medium", "format_code", names=("127.0.0.1",)),
        Expect("MCS502", "low", "format_code", names=("'node'",)),
        Expect("MCS101", "info", "format_code", names=("node was found",)),
    ),
)
