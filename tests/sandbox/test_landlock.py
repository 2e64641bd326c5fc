"""The kernel interface, against this machine's kernel, in real child processes: what a
ruleset handling EXECUTE lets a process run (root is held too), what it cannot stop (the
loader run by hand, a memfd: the limits the docs state), renames across directories, TCP
ports."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpshim.sandbox import landlock
from tests.fixtures.landlockhelp import ABI, LOADER, needs_landlock, restricted

pytestmark = needs_landlock
TRUE = os.path.realpath("/bin/true")
LS = os.path.realpath("/bin/ls")


def test_the_abi_is_probed_and_the_reason_is_empty_where_it_works() -> None:
    abi, why = landlock.unavailable()
    assert abi == landlock.abi_version() >= 1 and why == ""
    assert landlock.write_rights(1) & landlock.REFER == 0
    assert landlock.write_rights(3) & landlock.TRUNCATE


def test_execute_covers_the_loader_not_the_shared_libraries(tmp_path: Path) -> None:
    """ls needs libc, libselinux, libpcre2: mapped by the loader, never executed. Only the
    program and its ELF interpreter need EXECUTE; without the loader nothing dynamic runs.
    As root too (the tests run as root here and in CI)."""
    copy = tmp_path / "true-copy"
    shutil.copy(TRUE, copy)
    got = restricted(
        landlock.EXECUTE,
        [(LS, landlock.EXECUTE), (LOADER, landlock.EXECUTE), (TRUE, landlock.EXECUTE)],
        [("ls", "run", [LS, "-d", "/"]), ("copy", "run", [str(copy)])],
    )
    assert got["ls"] == ["ran", 0, "/\n"]
    assert got["copy"] == ["error", 13]  # EACCES, for root as for anyone
    without_loader = restricted(landlock.EXECUTE, [(LS, landlock.EXECUTE)],
                                [("ls", "run", [LS, "-d", "/"])])  # fmt: skip
    assert without_loader["ls"] == ["error", 13]


def test_the_loader_by_hand_and_a_memfd_run_past_the_rules(tmp_path: Path) -> None:
    """The documented limits: Landlock checks the files exec'd, so `ld.so FILE` and a
    program in a memfd run what no rule allows (review flags both: MCS411)."""
    copy = tmp_path / "true-copy"
    shutil.copy(TRUE, copy)
    got = restricted(
        landlock.EXECUTE,
        [(LOADER, landlock.EXECUTE)],
        [("loader", "run", [LOADER, str(copy)]), ("memfd", "memfd", TRUE)],
    )
    assert got["loader"] == ["ran", 0, ""]
    assert got["memfd"] == ["ran", 0, ""]


@pytest.mark.skipif(ABI < 2, reason="REFER needs Landlock ABI 2")
def test_without_refer_on_root_a_rename_across_directories_fails(tmp_path: Path) -> None:
    """Every ruleset of ABI 2+ denies reparenting unless REFER is allowed: the reason the
    containment allows REFER beneath / (the write rights still decide)."""
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    for name in ("one", "two"):
        (tmp_path / "a" / name).write_text("x")
    a, b = tmp_path / "a", tmp_path / "b"
    plain = restricted(landlock.EXECUTE | landlock.REFER, [(LOADER, landlock.EXECUTE)],
                       [("mv", "rename", [str(a / "one"), str(b / "one")])])  # fmt: skip
    assert plain["mv"] == ["error", 18]  # EXDEV
    refer = restricted(
        landlock.EXECUTE | landlock.REFER,
        [(LOADER, landlock.EXECUTE), ("/", landlock.REFER)],
        [("mv", "rename", [str(a / "two"), str(b / "two")])],
    )
    assert refer["mv"] == ["ok"] and (b / "two").exists()


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


@pytest.mark.skipif(ABI < 4, reason="TCP rules need Landlock ABI 4 (Linux 6.7)")
def test_connect_is_held_to_the_allowed_ports_udp_is_not(listeners: tuple[int, int]) -> None:
    allowed, other = listeners
    got = restricted(
        landlock.EXECUTE,
        [(LOADER, landlock.EXECUTE)],
        [
            ("allowed", "connect", ["127.0.0.1", allowed, socket.SOCK_STREAM]),
            ("other", "connect", ["127.0.0.1", other, socket.SOCK_STREAM]),
            ("other6", "connect", ["::1", other, socket.SOCK_STREAM]),
            ("udp", "connect", ["127.0.0.1", other, socket.SOCK_DGRAM]),
        ],
        net=landlock.CONNECT_TCP,
        ports=(allowed,),
    )
    assert got["allowed"] == ["ok"] and got["udp"] == ["ok"]
    assert got["other"] == ["error", 13] and got["other6"] == ["error", 13]
