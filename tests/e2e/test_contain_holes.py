"""What `run --mcp --lock L --contain` did not hold (issue 39), each tried through the SDK's
client driving a real SDK server under the real `mcpshim run`: every protocol the start
line claims (MPTCP to a port the lock does not list is refused; a Unix socket among the
lock's destinations leaves the TCP rules on)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpshim.contract.lockfile import load_lock
from tests.e2e.test_contain import _call, _calls
from tests.fixtures.approvescenario import run_mcp
from tests.fixtures.home import FIXTURES, Home, install
from tests.fixtures.landlockhelp import ABI, needs_landlock
from tests.fixtures.runhelp import command as mcpshim
from tests.fixtures.runhelp import events, needs_trace

SERVER = [sys.executable, str(FIXTURES / "mcp_contain_server.py")]
pytestmark = [needs_landlock, needs_trace]


@pytest.fixture
def ports() -> Iterator[tuple[int, int]]:
    socks = []
    for _ in range(2):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        socks.append(s)
    yield socks[0].getsockname()[1], socks[1].getsockname()[1]
    for s in socks:
        s.close()


@pytest.fixture
def unix_listener(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "browser.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(8)
    yield path
    s.close()


@pytest.mark.skipif(ABI < 4, reason="TCP rules need Landlock ABI 4 (Linux 6.7)")
def test_mptcp_is_refused_and_a_unix_destination_keeps_the_tcp_rules(
    home: Home, tmp_path: Path, ports: tuple[int, int], unix_listener: str
) -> None:
    install(home, ["git"])
    allowed, other = ports
    sid, out = run_mcp(home, SERVER, _calls(
        _call("connect", port=allowed, hold=1.5),
        _call("connect", unix=unix_listener, hold=1.5),
    ), "--name", "holes")  # fmt: skip
    assert out == ["connected", "connected"]
    lock = tmp_path / "mcpshim.lock"
    done = mcpshim(home, "approve", "--session", sid, "--lock", str(lock), "--yes")
    assert done.returncode == 0, done.stderr
    approval = load_lock(lock).servers["holes"]
    # the server's own sockets: filed outside tool calls (the server is no call's process)
    listed = {*approval.startup.destinations, *approval.tools["connect"].boundary.destinations}
    assert listed == {f"127.0.0.1:{allowed}", unix_listener}

    sid, out = run_mcp(home, SERVER, _calls(
        _call("connect", port=other),
        _call("connect", port=other, mptcp=True),
        _call("connect", port=allowed, mptcp=True),
        _call("connect", port=allowed),
        _call("connect", unix=unix_listener),
    ), "--name", "holes", "--lock", str(lock), "--contain")  # fmt: skip
    assert out == [
        "error: Permission denied",  # a port the lock does not list, held though it lists a socket
        "error: Permission denied",  # MPTCP: refused, whatever the port
        "error: Permission denied",
        "connected",
        "connected",  # Unix sockets are a named limit
    ]
    [start] = events(home, "session-start", sid)
    contain = start["contain"]
    assert contain["connect"] == [allowed] and contain["mptcp"] == "refused"
    assert contain["not_restricted"] == [
        "UDP",
        f"Unix sockets (the lock lists {unix_listener})",
        "listening",
    ]
