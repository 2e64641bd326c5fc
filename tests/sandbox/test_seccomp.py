"""MPTCP and the port rules, against this machine's kernel, in real child processes
(issue 39 item 3): Landlock's TCP port rules do not hold an IPPROTO_MPTCP socket here, so a
contained family whose ports are held gets the seccomp filter that refuses such sockets;
plain TCP to an allowed port still connects."""

from __future__ import annotations

import platform
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpshim.sandbox import landlock, seccomp
from tests.fixtures.landlockhelp import ABI, LOADER, needs_landlock, restricted

pytestmark = [
    needs_landlock,
    pytest.mark.skipif(ABI < 4, reason="TCP rules need Landlock ABI 4 (Linux 6.7)"),
]
MPTCP_ON = Path("/proc/sys/net/mptcp/enabled")


@pytest.fixture
def listeners() -> Iterator[tuple[int, int]]:
    socks = []
    for _ in range(2):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        socks.append(s)
    yield socks[0].getsockname()[1], socks[1].getsockname()[1]
    for s in socks:
        s.close()


def _tries(allowed: int, other: int) -> list[tuple[str, str, list[object]]]:
    return [
        ("tcp", "connect", ["127.0.0.1", allowed, socket.SOCK_STREAM]),
        ("tcp-other", "connect", ["127.0.0.1", other, socket.SOCK_STREAM]),
        ("mptcp-other", "mptcp", ["127.0.0.1", other, socket.SOCK_STREAM]),
        ("mptcp6-other", "mptcp", ["::1", other, socket.SOCK_STREAM | socket.SOCK_NONBLOCK]),
        ("mptcp", "mptcp", ["127.0.0.1", allowed, socket.SOCK_STREAM]),
    ]


@pytest.mark.skipif(
    not MPTCP_ON.exists() or MPTCP_ON.read_text().strip() != "1", reason="MPTCP is off here"
)
def test_landlock_alone_lets_mptcp_past_the_port_rules(listeners: tuple[int, int]) -> None:
    """The measured fact the filter is for (Linux 6.18, ABI 7): if a kernel's rules come to
    hold MPTCP, this fails and says the filter may go."""
    allowed, other = listeners
    got = restricted(landlock.EXECUTE, [(LOADER, landlock.EXECUTE)], _tries(allowed, other)[:3],
                     net=landlock.CONNECT_TCP, ports=(allowed,))  # fmt: skip
    assert got["tcp"] == ["ok"] and got["tcp-other"] == ["error", 13]
    assert got["mptcp-other"] == ["ok"]  # connected and sent, to a port no rule allows


def test_the_filter_refuses_every_mptcp_socket_and_keeps_tcp(listeners: tuple[int, int]) -> None:
    allowed, other = listeners
    got = restricted(landlock.EXECUTE, [(LOADER, landlock.EXECUTE)], _tries(allowed, other),
                     net=landlock.CONNECT_TCP, ports=(allowed,), no_mptcp=True)  # fmt: skip
    assert got["tcp"] == ["ok"] and got["tcp-other"] == ["error", 13]
    # the socket itself is refused (EACCES), whatever its family, flags or port
    assert got["mptcp-other"] == got["mptcp6-other"] == got["mptcp"] == ["error", 13]


def test_the_program_checks_each_abi_a_machine_runs() -> None:
    """Every ABI's socket and io_uring_setup numbers reach their check; the jumps land
    inside the program (a wrong offset is a filter the kernel refuses, or one that
    allows)."""
    for machine in ("x86_64", "aarch64"):
        prog = seccomp.program(machine)
        assert len(prog) < 64
        for i, (code, jt, _jf, _k) in enumerate(prog):
            if code == 0x15:
                assert i + 1 + jt < len(prog)
        compared = {k for code, _jt, _jf, k in prog if code == 0x15}
        assert seccomp.IPPROTO_MPTCP in compared and 425 in compared
    assert {41, 0x40000029, 359, 102} <= {k for c, _, _, k in seccomp.program("x86_64")}
    assert {198, 281} <= {k for c, _, _, k in seccomp.program("aarch64")}
    assert seccomp.available() is None or platform.machine() not in ("x86_64", "aarch64")
