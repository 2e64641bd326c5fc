"""The network facts of a real browser session are the same whatever of strace's output
the pump leaves out (issue 42): Playwright's MCP server drives Debian's Chromium through
a page server of this test, under strace with `run`'s trace options; the facts built from
every line strace wrote (what `run` stored before issue 42) and from what LinePump keeps
now are one set of (process, call, destination, outcome, DNS questions), and the lines
left out are most of the output (Chromium's IPC sends)."""

from __future__ import annotations

import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpshim.log import execlog
from mcpshim.trace.net import NetAttempt
from mcpshim.trace.parse import LinePump, parse_output
from mcpshim.trace.strace import build_trace, strace_argv
from tests.corpus.harness import UnavailableError, servers_installed
from tests.fixtures.runhelp import TRACEABLE

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
    not TRACEABLE or not os.access(CHROMIUM, os.X_OK) or shutil.which("node") is None,
    reason="needs strace allowed to trace, Debian's chromium and node",
)
PAGE = b"<!doctype html><title>t</title><input id=name><button id=go>Go</button>"


class _Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *_a: Any) -> None:
        pass


@pytest.fixture
def pages() -> Iterator[int]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()


async def _session(params: StdioServerParameters, url: str) -> None:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        for name, args in [
            ("browser_navigate", {"url": url}),
            ("browser_type", {"target": "#name", "element": "name", "text": "x"}),
            ("browser_click", {"target": "#go", "element": "go"}),
            ("browser_navigate", {"url": url + "next"}),
            ("browser_close", {}),
        ]:
            res = await s.call_tool(name, args)
            assert not res.is_error, (name, res.content)


def facts(attempts: list[NetAttempt]) -> set[tuple[Any, ...]]:
    return {(a.pid, a.call, a.family, a.address, a.port, a.outcome, a.queries) for a in attempts}


def test_a_browser_session_s_network_facts_are_kept(tmp_path: Path, pages: int) -> None:
    try:
        bin_dir = servers_installed()
    except UnavailableError as exc:
        pytest.skip(str(exc))
    strace = shutil.which("strace")
    assert strace is not None
    out = tmp_path / "strace.out"
    server = [str(bin_dir / "playwright-mcp"), "--executable-path", CHROMIUM, "--headless",
              "--no-sandbox", "--isolated", "--output-dir", str(tmp_path / "out")]  # fmt: skip
    # run's own strace command line, but strace the parent (not -DD): the client's wait for
    # its server is the wait for the whole trace
    argv = [a for a in strace_argv(strace, str(out), server, env=False) if a != "-DD"]
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(tmp_path))
    anyio.run(_session, params, f"http://127.0.0.1:{pages}/")
    raw = out.read_bytes()
    root = int(raw.split(b" ", 1)[0])
    pump = LinePump()
    kept = b"".join(pump.feed(raw[i : i + (1 << 20)]) for i in range(0, len(raw), 1 << 20))
    kept += pump.flush()

    def trace_of(data: bytes) -> list[NetAttempt]:
        files = parse_output(data.splitlines(keepends=True))
        anchor = execlog.now_anchor()
        return build_trace(files, root, b"/", None, os.getpid(), anchor, execlog.CLK_TCK).net

    before, after = trace_of(raw), trace_of(kept)
    assert facts(after) == facts(before)
    assert after == before  # counts, times and sockets too
    to_pages = [a for a in after if (a.call, a.address, a.port) == ("connect", b"127.0.0.1", pages)]
    assert to_pages and all(a.outcome == "connected" for a in to_pages), after
    assert raw.count(b"sendto(") > 1000  # Chromium's IPC: every send stops and is printed
    assert kept.count(b"\n") < raw.count(b"\n") // 2 and len(kept) < len(raw) // 10
