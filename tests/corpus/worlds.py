"""What the newer corpus scenarios set up beside a workspace: a local page server the policy
lists (a project's own dev server or docs), the second venv of pinned PyPI servers, planted
project files, and the wait that makes a scenario's order certain."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from mcpshim.base.flock import FileLock
from tests.corpus.harness import UnavailableError, Workspace, servers_installed
from tests.fixtures import pyservers

#: seconds a page under /slow/ takes to come (see PageServer)
SLOW = 5.0

__all__ = [
    "PageServer",
    "Remote",
    "heard",
    "mcp2_installed",
    "pages",
    "plant",
    "tmp_copy",
    "wait_for",
]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/slow/"):  # a dev server building the page on first load
            time.sleep(SLOW)
            self.path = self.path.removeprefix("/slow")
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        self.server.hits.append(self.path)  # type: ignore[attr-defined]


class PageServer:
    """Static pages on 127.0.0.1 in a thread of the test: the destination benign browsing
    and fetching go to. It is listed in the scenario's policy (`[network] destinations`),
    as a user lists their own dev server, so a contact with it is no finding; the corpus
    listener (CORPUS_PORT) stays unlisted, the stand-in for a remote host."""

    def __init__(self, w: Workspace, files: dict[str, str]) -> None:
        root = w.root / "pages"
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        handler = partial(_Quiet, directory=str(root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.hits = []  # type: ignore[attr-defined]
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        w.notes["page_port"] = self.port
        w.notes.setdefault("destinations", []).append(f"127.0.0.1:{self.port}")
        w.notes["page_hits"] = self.httpd.hits  # type: ignore[attr-defined]
        w.cleanup.append(self.close)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Heard(http.server.BaseHTTPRequestHandler):
    def _answer(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(size) if size else b""
        self.server.heard.append(self.requestline.encode() + b"\n" + body)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def log_message(self, format: str, *args: object) -> None:
        return


class Remote:
    """The "remote host" of an attack: an HTTP server on 127.0.0.1 that answers every
    request at once (a browser's fetch, an HTTP client, curl wait for an answer; the
    harness's Listener gives none) and keeps what it was told in `w.heard`. It takes the
    corpus's port (CORPUS_PORT, `w.port`), which no policy lists."""

    def __init__(self, w: Workspace) -> None:
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Heard)
        self.httpd.heard = w.heard  # type: ignore[attr-defined]
        w.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        w.cleanup.append(self.close)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def heard(w: Workspace, needle: bytes, what: str) -> list[str]:
    """A scenario's proof: the remote host was told `needle` (else what did not happen)."""
    return [] if needle in b"".join(w.heard) else [f"{what} never reached the remote host"]


def pages(w: Workspace) -> str:
    """The page server's base URL (started by the scenario's setup)."""
    return f"http://127.0.0.1:{w.notes['page_port']}"


def mcp2_installed() -> Path:
    """The pinned servers that need mcp>=2.3 (tests/fixtures/pyservers.py, MCP2), with
    readabilipy's Readability.js dependencies in place: at its first fetch with node and
    npm on PATH, mcp-server-fetch's readabilipy runs `npm install` (unpinned versions) in
    its own package directory, and uses node for every later page. The corpus gives it
    that later state from the pinned npm servers (tests/corpus/servers), so each fetch
    runs the same node, never npm."""
    try:
        bin_dir = pyservers.install(pyservers.MCP2)
    except pyservers.UnavailableError as exc:
        raise UnavailableError(str(exc)) from None
    modules = servers_installed().parent
    [js] = (bin_dir.parent / "lib").glob("python3*/site-packages/readabilipy/javascript")
    with FileLock(pyservers.MCP2.lock, 900):
        if not (js / "node_modules").exists():
            (js / "node_modules").symlink_to(modules)
    return bin_dir


def plant(w: Workspace, files: dict[str, str], mode: int = 0o644) -> None:
    """Files an agent (or a dependency) wrote into the checkout before the session."""
    for name, text in files.items():
        p = w.ws / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        p.chmod(mode)


def tmp_copy(w: Workspace, tag: str) -> str:
    """Where an attack copies a binary to run it from /tmp (named by the run's port, so two
    runs at once never share it); removed when the scenario ends."""
    path = Path(f"/tmp/mcpshim-corpus-{w.port}-{tag}")
    w.cleanup.append(lambda: path.unlink(missing_ok=True))
    return str(path)


def wait_for(what: str, ready: Callable[[], bool], timeout: float = 20.0) -> None:
    """Wait until `ready` holds (a listener heard its visitor, a file appeared)."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"still waiting after {timeout:.0f}s: {what}")
        time.sleep(0.05)
