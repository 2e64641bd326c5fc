"""From a lock entry to the rules: what may run (approved programs and what the kernel opens
for them, shims, the tracer), which ports, which directories, and what is said when a lock
or a kernel leaves something open."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mcpshim.contract.lockfile import Boundary, Executable, ServerApproval, ToolApproval
from mcpshim.sandbox.plan import make_plan, ports_of

TRUE = os.path.realpath("/bin/true")
SH = os.path.realpath("/bin/sh")


def _server(tmp_path: Path, destinations: tuple[str, ...] = ()) -> ServerApproval:
    tool = ToolApproval(
        "run",
        "sha",
        boundary=Boundary(
            (Executable(SH), Executable(str(tmp_path / "gone"))), destinations=destinations
        ),
    )
    return ServerApproval("srv", program=Executable(TRUE), startup=Boundary(), tools={"run": tool})


def test_ports_of_destinations() -> None:
    ports, portless = ports_of(
        ["10.0.0.5:443", "[::1]:8080", "github.com", "2001:db8::1", "1.1.1.1:53 (udp)", "h:0"]
    )
    assert ports == {443, 8080}
    assert portless == ["github.com", "2001:db8::1", "h:0"]


def test_the_plan_allows_approved_programs_what_runs_them_shims_and_the_tracer(
    tmp_path: Path,
) -> None:
    shim = tmp_path / "shims" / "git"
    shim.parent.mkdir()
    shim.write_text('#!/bin/sh\nexec /usr/bin/git "$@"\n')
    strace = shutil.which("strace") or TRUE
    plan = make_plan(_server(tmp_path), "L", 7, {str(shim): "shim git"}, strace, "/usr/bin",
                     None, str(tmp_path / "log"))  # fmt: skip
    why = {a.path: a.why for a in plan.execute}
    assert why[TRUE] == why[SH] == "approved"
    assert why[str(shim)] == "shim git" and why["/bin/sh"] == f"#! interpreter of {shim}"
    assert why[strace] == "the tracer (strace)"
    assert any(w == f"ELF interpreter of {TRUE}" for w in why.values())
    assert plan.missing == (str(tmp_path / "gone"),)
    assert plan.write is None and plan.restricts() == ["execute"]
    assert plan.connect is None and plan.open_net == "the lock lists no network destinations"
    line = plan.summary(7)
    assert "contained by Landlock ABI 7" in line
    assert "write: not restricted (--contain-write DIR)" in line
    assert "connect: not restricted (the lock lists no network destinations)" in line


def test_ports_and_write_dirs_and_what_an_old_kernel_cannot_hold(tmp_path: Path) -> None:
    server = _server(tmp_path, ("127.0.0.1:8443", "1.1.1.1:53 (udp)"))
    plan = make_plan(server, "L", 7, {}, None, "", [str(tmp_path)], "/log")
    assert plan.connect == (8443,) and plan.write == (str(tmp_path), "/log")
    assert plan.restricts() == ["execute", "write", "connect"]
    assert "connect: TCP ports 8443 only" in plan.summary(7)
    old = make_plan(server, "L", 3, {}, None, "", None, "/log")
    assert old.connect is None and "ABI 3 has no network rules" in old.open_net
    oldest = make_plan(server, "L", 1, {}, None, "", ["/w"], "/log")
    assert any("renaming" in n for n in oldest.notes)
    assert any("truncating" in n for n in oldest.notes)
    portless = make_plan(_server(tmp_path, ("github.com",)), "L", 7, {}, None, "", None, "/l")
    assert portless.connect is None and "without a port: github.com" in portless.open_net
    payload = plan.payload(7)
    assert payload["state"] == "landlock" and payload["abi"] == 7
    assert payload["connect"] == [8443] and payload["write"] == [str(tmp_path), "/log"]


def test_a_unix_socket_destination_leaves_the_tcp_rules_as_they_are(tmp_path: Path) -> None:
    """A Playwright lock lists the browser's own Unix socket: that named no port and
    switched every TCP rule off. Now the TCP ports are held, the socket stays a named limit,
    and the start line says what is not restricted."""
    sock = "/tmp/pw-1/browser-2.sock"
    server = _server(tmp_path, ("127.0.0.1:9222", sock, "@abstract", "8.8.8.8:53 (udp)"))
    plan = make_plan(server, "L", 7, {}, None, "", None, "/log")
    assert plan.connect == (9222,) and plan.unix == (sock, "@abstract")
    line = plan.summary(7)
    assert "connect: TCP ports 9222 only, MPTCP sockets refused" in line
    unix = f"Unix sockets (the lock lists {sock}, @abstract)"
    assert f"not restricted: UDP, {unix}, listening" in line
    payload = plan.payload(7)
    assert payload["mptcp"] == "refused"
    assert payload["not_restricted"] == ["UDP", unix, "listening"]
    only_unix = make_plan(_server(tmp_path, (sock,)), "L", 7, {}, None, "", None, "/log")
    assert only_unix.connect is None
    assert only_unix.open_net == "the lock lists no TCP destinations"
    assert ports_of([sock, "@x", "(unnamed)", "h:1"]) == ({1}, [])
