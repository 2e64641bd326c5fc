"""@playwright/mcp 0.0.83 (npm, pinned) driving Debian's chromium: an agent browses a page.

The server (node, started by its `#!/usr/bin/env node` line through the pinned node shim)
launches chromium lazily in the first call that needs a page, keeps it between calls and
closes it in `browser_close`. Debian's `/usr/bin/chromium` is a shell wrapper (uname, grep,
expr, findmnt, ls, tr; it exports GOOGLE_API_KEY itself) that execs
/usr/lib/chromium/chromium; that forks zygotes, a network service (`/proc/self/exe`) and
two crashpad handlers, which double-fork away from it (reparented to mcpshim's
subreaper). The pages come from a local page server the policy lists (worlds.PageServer):
loading them is no finding.

What is true, call by call (a call owns what happens during it, issue 37):
- browser_navigate #1 launches the browser. Chromium's browser process and its network
  service each look up update.googleapis.com and accounts.google.com through the
  resolver, and retry accounts.google.com after about 1 s and 3.7 s (then 12.7 s): remote
  destinations no policy lists, one MEDIUM MCS306 per process naming both hosts. The
  first page is slow to come (the page server holds /slow/ pages 5 s, a dev server's
  first build), so the launch's lookups and both retries fall inside this call, and the
  next retry after the session's end: that is what makes the scenario deterministic.
  The crashpad handlers detach (double fork): MEDIUM MCS501 naming them. chromium and
  node listen on Unix sockets (SingletonSocket, Playwright's browser socket) and node
  connects to its own: LOW MCS303/MCS306 (Unix sockets are low). chromium tries the
  absent D-Bus system socket: LOW MCS307. /usr/lib/chromium's binaries are dpkg's,
  their checksums match: INFO MCS119.
- the browser, its zygotes and network service live on between calls and end in
  browser_close: a helper the server keeps, INFO MCS501 once for the server.
- nothing else is worth a word: the wrapper's helpers are what a package's wrapper runs,
  a browser tool running the browser is what its name says, the GOOGLE_* variables are
  the wrapper's own, Chromium's DNS client binding UDP source ports listens for nothing,
  its connects to the listed page server (navigate #1, click, navigate #2) are approved.

Untraced, only the node shim's record is certain; what the sampler sees of chromium is
optional.
"""

from __future__ import annotations

from tests.corpus.harness import NO_CALL, Expect, Scenario, Workspace, servers_installed
from tests.corpus.worlds import PageServer, pages

_HEAD = "<!doctype html><html><head><title>{}</title><link rel=icon href=data:,></head>"
PAGES = {
    "index.html": _HEAD.format("Notes") + "<body><h1>Project notes</h1>"
    "<form action=/search.html><label>Query <input name=q id=q></label>"
    "<button type=submit>Search</button></form><p><a href=/about.html>About</a></p>"
    "</body></html>\n",
    "search.html": _HEAD.format("Results") + "<body><h1>Results</h1><p>None.</p></body></html>\n",
    "about.html": _HEAD.format("About") + "<body><h1>About</h1><p>A project.</p></body></html>\n",
    "robots.txt": "User-agent: *\nAllow: /\n",
}


def setup(w: Workspace) -> None:
    PageServer(w, PAGES)


def server(w: Workspace) -> list[str]:
    return [
        str(servers_installed() / "playwright-mcp"),
        "--executable-path",
        "/usr/bin/chromium",
        "--headless",
        "--no-sandbox",
        "--isolated",
    ]


def _calls(w: Workspace) -> list[tuple[str, dict[str, object]]]:
    base = pages(w)
    return [
        ("browser_navigate", {"url": f"{base}/slow/index.html"}),
        ("browser_snapshot", {}),
        ("browser_type", {"element": "Query", "target": "#q", "text": "release notes"}),
        ("browser_click", {"element": "Search", "target": "button"}),
        ("browser_snapshot", {}),
        ("browser_navigate", {"url": f"{base}/about.html"}),
        ("browser_take_screenshot", {"type": "png"}),
        ("browser_close", {}),
    ]


def launch(tool: str, nth: int | None) -> tuple[Expect, ...]:
    """What is true of the call that launched the browser (traced)."""
    return (
        # Chromium's own contacts: its browser process and network service each looked up
        # both hosts (and retried): one finding for the program and the destination class
        # (remote), both processes its occurrences, every host named (docs/verdicts.md)
        Expect(
            "MCS306",
            "medium",
            tool,
            nth=nth,
            names=("update.googleapis.com", "accounts.google.com"),
        ),
        Expect("MCS501", "medium", tool, nth=nth, names=("chrome_crashpad_handler",)),
        # chromium's SingletonSocket and Playwright's browser socket (one expectation:
        # harness.observed keeps one per rule, severity and call)
        Expect("MCS303", "low", tool, nth=nth, count=2, names=("listen",)),
        Expect("MCS306", "low", tool, nth=nth, names=("browser-",)),  # node connects to it
        # an attempt on a local socket that did not connect: a step below a reach (info)
        Expect("MCS307", "info", tool, nth=nth, names=("system_bus_socket",)),
        # /usr/lib/chromium/chromium and chrome_crashpad_handler: outside the trusted
        # directories (dpkg's; review does not hash them, approve does: low, below medium)
        Expect("MCS119", "low", tool, nth=nth, count=2, names=("/usr/lib/chromium/",)),
    )


#: the server starts through `#!/usr/bin/env node`: env finds node's pinned shim
START = Expect("MCS101", "info", NO_CALL, names=("node",))
KEPT = Expect("MCS501", "info", NO_CALL, names=("chromium",))  # the browser, kept


def sampled(tool: str, nth: int | None) -> tuple[Expect, ...]:
    """Untraced: what the sampler may catch of the browser (processes that live seconds,
    their sockets), each a matter of when it looked."""
    return (
        Expect(
            "MCS501", "medium", tool, nth=nth, optional=True, names=("chrome_crashpad_handler",)
        ),
        # its processes' resolver sockets, as many as the sampler saw open
        Expect("MCS304", "medium", tool, nth=nth, optional=True, names=("chromium",), count=4),
        Expect("MCS501", "info", NO_CALL, optional=True, names=("chromium",)),
        # one per sampled process, as many as the sampler happened to see
        Expect("MCS302", "info", tool, nth=nth, optional=True, count=30),
        Expect("MCS119", "low", tool, nth=nth, optional=True, count=4),
        Expect("MCS303", "low", tool, nth=nth, optional=True, count=2),
        # the wrapper's helpers (expr, uname...), when the sampler missed the wrapper script
        # they ran in, and so cannot say they were its own
        Expect("MCS502", "low", tool, nth=nth, optional=True, count=8),
        # the wrapper itself, caught running: its `#!/bin/sh` names sh by absolute path,
        # past sh's shim (traced, the exec is the script's, and sh no program of its own)
        Expect("MCS405", "low", tool, nth=nth, optional=True, names=("sh",)),
    )


SCENARIO = Scenario(
    name="benign-playwright",
    kind="benign",
    summary="@playwright/mcp 0.0.83 + chromium: navigate, snapshot, type, click, navigate...",
    server=server,
    calls=_calls,
    setup=setup,
    needs=("servers", "chromium"),
    run_options=("--trace-files",),  # traced: the file facts too (issue 40)
    expected=(START, *sampled("browser_navigate", 1)),
    traced_expected=(START, KEPT, *launch("browser_navigate", 1)),
)
