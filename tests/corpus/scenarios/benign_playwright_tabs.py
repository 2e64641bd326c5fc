"""@playwright/mcp 0.0.83 with Debian's chromium, the benign session in another call order:
`browser_tabs` first (a new tab on the slow first page), so the browser is launched by
browser_tabs instead of browser_navigate.

Everything benign_playwright.py says holds, filed under the call that launched the
browser: browser_tabs (Chromium's lookups of update.googleapis.com and accounts.google.com
and their retries, held inside it by the slow first page; the detached crashpad handlers;
the Unix sockets; the D-Bus attempt; dpkg's binaries); the browser is kept between calls
(INFO once for the server) and ends in `browser_close`.
"""

from __future__ import annotations

from tests.corpus.harness import Scenario, Workspace
from tests.corpus.scenarios.benign_playwright import KEPT, START, launch, sampled, server, setup
from tests.corpus.worlds import pages


def _calls(w: Workspace) -> list[tuple[str, dict[str, object]]]:
    base = pages(w)
    return [
        ("browser_tabs", {"action": "new", "url": f"{base}/slow/index.html"}),
        ("browser_tabs", {"action": "list"}),
        ("browser_snapshot", {}),
        ("browser_type", {"element": "Query", "target": "#q", "text": "changelog"}),
        ("browser_click", {"element": "Search", "target": "button"}),
        ("browser_navigate", {"url": f"{base}/about.html"}),
        ("browser_take_screenshot", {"type": "png"}),
        ("browser_close", {}),
    ]


SCENARIO = Scenario(
    name="benign-playwright-tabs-first",
    kind="benign",
    summary="@playwright/mcp 0.0.83 + chromium: browser_tabs new first, then the same work",
    server=server,
    calls=_calls,
    setup=setup,
    needs=("servers", "chromium"),
    run_options=("--trace-files",),  # traced: the file facts too (issue 40)
    expected=(START, *sampled("browser_tabs", 1)),
    traced_expected=(START, KEPT, *launch("browser_tabs", 1)),
)
