"""mcp-server-fetch 2026.10.24 (PyPI, pinned; the official reference fetcher): an agent
reads a project's docs pages.

The server fetches in its own Python process (httpx), robots.txt first; the pages come
from a local page server the policy lists (started with `--allow-private-ips`, which a
loopback page needs). For an HTML page, readabilipy runs `node -v` and `node
ExtractArticle.js` (Readability.js; see worlds.mcp2_installed for why its dependencies
are in place), both through PATH; a `raw` fetch runs nothing.

True: under each HTML fetch, node was found through PATH and reached its pinned shim (INFO
MCS101) and the fetch tool started node, which its name does not explain (LOW MCS502: a
hint); the server's own connections go to the listed page server (no finding); the raw
fetch runs no process.
"""

from __future__ import annotations

from typing import Any

from tests.corpus.harness import Expect, Scenario, Workspace
from tests.corpus.scenarios.benign_playwright import PAGES
from tests.corpus.worlds import PageServer, mcp2_installed, pages

DOC = (
    "<!doctype html><html><head><title>Guide</title></head><body><article><h1>Guide</h1>"
    + "<p>Run the tests with make test. Each module says why it exists.</p>" * 8
    + "</article></body></html>\n"
)


def setup(w: Workspace) -> None:
    PageServer(w, {**PAGES, "guide.html": DOC})


def server(w: Workspace) -> list[str]:
    return [str(mcp2_installed() / "mcp-server-fetch"), "--allow-private-ips"]


def _calls(w: Workspace) -> list[tuple[str, Any]]:
    base = pages(w)
    return [
        ("fetch", {"url": f"{base}/guide.html"}),
        ("fetch", {"url": f"{base}/about.html", "max_length": 2000}),
        ("fetch", {"url": f"{base}/robots.txt", "raw": True}),
    ]


def readability(nth: int) -> tuple[Expect, ...]:
    """readabilipy's node, under the nth fetch (an HTML page)."""
    return (
        Expect("MCS101", "info", "fetch", nth=nth, names=("node",)),
        Expect("MCS502", "low", "fetch", nth=nth, names=("node",)),
    )


SCENARIO = Scenario(
    name="benign-mcp-server-fetch",
    kind="benign",
    summary="mcp-server-fetch 2026.10.24: two HTML pages and a raw file from a listed server",
    server=server,
    calls=_calls,
    setup=setup,
    needs=("servers",),
    shims=("git", "sh", "npm", "node"),
    expected=(*readability(1), *readability(2)),
)
