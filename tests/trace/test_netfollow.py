"""Following socket calls through strace's real output: which getsockopt settles which
non-blocking connect when fds are reused, dup'd, inherited by a fork or kept across an
exec; threads; accepted connections; and the sanitizing cut of what a process sends."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpshim.log import execlog
from mcpshim.trace.net import NetAttempt
from mcpshim.trace.parse import LinePump, parse_output
from mcpshim.trace.strace import build_trace
from tests.fixtures.nethelp import free_port, listening
from tests.trace.test_parse import traced

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
NODE = shutil.which("node")


@pytest.fixture
def listener() -> Iterator[int]:
    with listening() as port:
        yield port


def attempts(tmp_path: Path, code: str) -> tuple[list[NetAttempt], int]:
    trace, root, status = traced(tmp_path, [sys.executable, "-c", textwrap.dedent(code)])
    assert status == 0
    return trace.net, root


PENDING = """
    import os, select, socket
    def pending(port):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        return s
    def so_error(s):
        select.select([], [s], [], 5)
        return s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
"""


def test_a_reused_fd_does_not_settle_the_old_connect(tmp_path: Path, listener: int) -> None:
    closed, port = free_port(), listener
    code = (
        PENDING
        + f"""
    a = pending({closed})
    fd = a.fileno()
    a.close()  # never asked: its outcome was not seen
    b = socket.socket()
    assert b.fileno() == fd
    b.connect(("127.0.0.1", {port}))  # blocking: its own outcome
    assert so_error(b) == 0
    """
    )
    net, _ = attempts(tmp_path, code)
    assert [(a.port, a.outcome, a.nonblocking, a.settled is None) for a in net] == [
        (closed, "in-progress", True, True),
        (port, "connected", False, True),
    ]


def test_a_dup_a_fork_and_an_exec_find_their_connect(tmp_path: Path, listener: int) -> None:
    closed, port = free_port(), listener
    code = (
        PENDING
        + f"""
    import sys
    a = pending({closed})
    select.select([], [a], [], 5)
    d = socket.socket(fileno=os.dup(a.fileno()))
    assert d.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 111  # asked through a dup
    b = pending({closed})
    pid = os.fork()
    if pid == 0:
        so_error(b)  # asked by a child, through its copy
        os._exit(0)
    os.waitpid(pid, 0)
    c = pending({port})
    c.set_inheritable(True)
    ask = "import socket, select; s = socket.socket(fileno=%d); select.select([], [s], [], 5); " \\
          "s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)" % c.fileno()
    os.execv(sys.executable, [sys.executable, "-c", ask])  # asked after an exec
    """
    )
    net, root = attempts(tmp_path, code)
    got = [(a.pid, a.port, a.outcome, a.errno, a.settled is not None) for a in net]
    assert got == [
        (root, closed, "refused", "ECONNREFUSED", True),
        (root, closed, "refused", "ECONNREFUSED", True),
        (root, port, "connected", "", True),
    ]


def test_a_thread_connects_for_its_process(tmp_path: Path, listener: int) -> None:
    port = listener
    code = f"""
    import socket, threading
    t = threading.Thread(target=lambda: socket.create_connection(("127.0.0.1", {port})))
    t.start()
    t.join()
    """
    net, root = attempts(tmp_path, code)
    [a] = net
    assert (a.pid, a.outcome) == (root, "connected") and a.tid != root


def test_accepted_connections_name_the_peer(tmp_path: Path) -> None:
    code = """
    import socket
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    c = socket.create_connection(srv.getsockname())
    s, peer = srv.accept()
    print(srv.getsockname()[1], c.getsockname()[1])
    """
    net, _ = attempts(tmp_path, code)
    listen, conn, acc = net
    assert (listen.call, conn.call, acc.call) == ("listen", "connect", "accept")
    assert (acc.address, acc.local_address, acc.local_port) == (b"127.0.0.1", b"127.0.0.1",
                                                                 listen.port)  # fmt: skip
    assert acc.port not in (None, listen.port) and acc.outcome == "accepted"


@pytest.mark.skipif(NODE is None, reason="needs node")
def test_node_connects_and_accepts_as_it_does(tmp_path: Path) -> None:
    """node: connect non-blocking, the outcome from getsockopt after epoll; listen on port 0
    (the port from the getsockname server.address() makes); accept4 with no address (the
    peer from the getpeername remoteAddress makes)."""
    assert NODE is not None
    closed = free_port()
    js = f"""
    const net = require("net");
    const srv = net.createServer(s => s.remoteAddress && s.destroy());
    srv.listen(0, "127.0.0.1", () => {{
      const c = net.connect(srv.address().port, "127.0.0.1", () => {{
        c.destroy();
        net.connect({closed}, "127.0.0.1").on("error", () => srv.close());
      }});
    }});
    """
    trace, _, status = traced(tmp_path, [NODE, "-e", textwrap.dedent(js)])
    assert status == 0
    got = [(a.call, a.outcome, a.nonblocking) for a in trace.net]
    assert ("listen", "listening", False) in got
    assert ("connect", "connected", True) in got and ("connect", "refused", True) in got
    [acc] = [a for a in trace.net if a.call == "accept"]
    [listen] = [a for a in trace.net if a.call == "listen"]
    [conn] = [a for a in trace.net if a.call == "connect" and a.outcome == "connected"]
    assert listen.port and listen.port == conn.port == acc.local_port
    assert acc.address == b"127.0.0.1" and acc.port not in (None, 0, listen.port)


def test_the_sanitized_lines_keep_no_byte_sent(tmp_path: Path) -> None:
    """Through the session's pump: a 200 KiB send (longer than strace prints) blocked while
    another thread writes its lines (the send's line is split), a UDP datagram and a DNS
    query. None of the bytes sent survive but the query's; the records are the same."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    secret = b"ghp_" + b"Q7w6" * 9
    code = f"""
    import socket, threading, time
    secret = ("ghp_" + "Q7w6" * 9).encode()  # (only the pieces are in argv)
    s = socket.create_connection(("127.0.0.1", {port}))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    def chatter():
        for _ in range(20):
            u.sendto(secret, ("127.0.0.1", 9))
            time.sleep(0.01)
    t = threading.Thread(target=chatter)
    t.start()
    s.sendall(secret * 50000)  # blocks until the reader below starts
    t.join()
    q = bytes.fromhex("abcd01000001000000000000") + b"\\x07example\\x04test\\x00"
    q += bytes([0, 1, 0, 1])  # type A, class IN
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(q, ("127.0.0.1", 53))
    """

    def reader() -> None:
        c, _ = srv.accept()
        time.sleep(0.3)
        while c.recv(1 << 20):
            pass

    threading.Thread(target=reader, daemon=True).start()
    trace, _root, _ = traced(tmp_path, [sys.executable, "-c", textwrap.dedent(code)])
    srv.close()
    raw = (tmp_path / "strace.out").read_bytes()
    assert b"resumed>" in raw and b"\\x51\\x37" in raw  # split lines; the secret, printed
    pump = LinePump()
    clean = b"".join(pump.feed(raw[i : i + 4096]) for i in range(0, len(raw), 4096))
    clean += pump.flush()
    hexed = b"".join(b"\\x%02x" % c for c in secret)
    assert secret not in clean and hexed[16:64] not in clean
    assert b"".join(b"\\x%02x" % c for c in b"example") in clean  # the DNS question stays
    again = build_trace(parse_output(clean.splitlines(keepends=True)), _root, b"/", None,
                        os.getpid(), execlog.now_anchor(), execlog.CLK_TCK)  # fmt: skip
    assert again.net == trace.net
    assert [a.queries for a in again.net if a.port == 53] == [((b"example.test", "A"),)]
    assert [(a.call, a.port, a.count) for a in again.net if a.port != 53] == [
        ("connect", port, 1),
        ("send", 9, 20),  # one socket's sends to one place, each within a second: one record
    ]


def test_sends_that_become_no_fact_are_not_stored(tmp_path: Path, listener: int) -> None:
    """A socketpair's sends (IPC), a connected stream's and a netlink socket's never
    become a fact: their lines are left out before anything is stored. Sends that name an
    address, or go out on a connected datagram socket (a DNS query), stay, and the facts
    from what is stored are the facts from strace's whole output."""
    code = f"""
    import socket
    a, b = socket.socketpair()
    d, e = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for _ in range(40):
        a.send(b"i" * 777)
        d.send(b"j" * 777)
        b.recv(1000), e.recv(1000)
    s = socket.create_connection(("127.0.0.1", {listener}))
    s.send(b"k" * 777)
    n = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    n.send(bytes.fromhex("1400000016000103") + bytes(12))
    q = bytes.fromhex("abcd01000001000000000000") + b"\\x07example\\x04test\\x00"
    q += bytes([0, 1, 0, 1])  # type A, class IN
    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    c.connect(("127.0.0.1", 53))
    c.send(q)
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x" * 777, ("127.0.0.1", 9))
    """
    trace, root, _ = traced(tmp_path, [sys.executable, "-c", textwrap.dedent(code)])
    raw = (tmp_path / "strace.out").read_bytes()
    assert raw.count(b", 777, ") == 82 and raw.count(b"sendto(") >= 84  # all were traced
    pump = LinePump()
    clean = b"".join(pump.feed(raw[i : i + 4096]) for i in range(0, len(raw), 4096))
    clean += pump.flush()
    sends = [ln for ln in clean.splitlines() if b" send" in ln[:48] and b"resumed>" not in ln]
    assert len(sends) == 2 and sum(b", 777, " in ln for ln in sends) == 1  # to 53 and to 9
    again = build_trace(parse_output(clean.splitlines(keepends=True)), root, b"/", None,
                        os.getpid(), execlog.now_anchor(), execlog.CLK_TCK)  # fmt: skip
    assert again.net == trace.net
    assert [(a.call, a.port, a.outcome) for a in again.net if a.call == "send"] == [
        ("send", 53, "sent"),
        ("send", 9, "sent"),
    ]
    assert again.net[-2].queries == ((b"example.test", "A"),)
