"""Approve, then contain, end to end: the SDK's client drives a real SDK server through the
real `mcpshim run --mcp`; one session is approved (`mcpshim approve`), the next runs under
`--lock L --contain`, and the kernel (Landlock) holds its family to the approval: an
approved tool runs git as before; a binary copied into a temp dir, and a workspace script
the lock did not approve run directly, get EACCES and never run, while `sh build.sh` runs
(the approved sh reads it: the card says so); a write outside --contain-write and a connect
to a port the lock does not list fail. Review says "blocked" under each call, in text,
JSON, SARIF, the report and the OTLP spans. Runs as root here and in CI: Landlock holds
root too."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession

from mcpshim.contract.lockfile import Lock, dumps_lock, load_lock
from tests.fixtures.approvescenario import MCPSHIM, run_mcp
from tests.fixtures.home import FIXTURES, Home, install
from tests.fixtures.landlockhelp import ABI, needs_landlock
from tests.fixtures.otelscenario import traces_of
from tests.fixtures.runhelp import command as mcpshim
from tests.fixtures.runhelp import events, needs_trace, only_session, run
from tests.fixtures.seccomp import NO_LANDLOCK_PRELUDE

SERVER = [sys.executable, str(FIXTURES / "mcp_contain_server.py")]
pytestmark = needs_landlock


@dataclass(frozen=True)
class Setup:
    home: Home
    lock: Path
    ws: Path
    approved_port: int
    other_port: int
    approval: str  # what `approve` printed (the cards)


@pytest.fixture
def listeners() -> Iterator[tuple[socket.socket, socket.socket]]:
    socks = []
    for _ in range(2):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        socks.append(s)
    yield socks[0], socks[1]
    for s in socks:
        s.close()


def _call(name: str, **args: Any) -> tuple[str, dict[str, Any]]:
    return name, args


def _calls(*calls: tuple[str, dict[str, Any]]) -> Any:
    async def script(s: ClientSession) -> list[str]:
        await s.list_tools()
        out = []
        for name, args in calls:
            result = await s.call_tool(name, args)
            out.append(result.content[0].text if result.content else "")  # type: ignore[union-attr]
        return out

    return script


@pytest.fixture
def approved(home: Home, tmp_path: Path, listeners: tuple[socket.socket, socket.socket]) -> Setup:
    """A session that runs git and `sh build.sh`, writes in the workspace and holds a
    connection long enough for the sampler to see it; approved into a lock."""
    install(home, ["git", "sh", "ls"])
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "build.sh").write_text("#!/bin/sh\necho built\n")
    (ws / "build.sh").chmod(0o755)
    port, other = (s.getsockname()[1] for s in listeners)
    sid, out = run_mcp(
        home,
        SERVER,
        _calls(
            _call("run", argv=["git", "--version"]),
            _call("run", argv=["sh", "build.sh"], cwd=str(ws)),
            _call("write", path=str(ws / "out")),
            _call("connect", port=port, hold=1.5),
        ),
        "--name",
        "contained",
    )
    assert out[1] == "status 0: built" and out[3] == "connected", out
    lock = tmp_path / "mcpshim.lock"
    done = mcpshim(home, "approve", "--session", sid, "--lock", str(lock), "--yes")
    assert done.returncode == 0, done.stderr
    server = load_lock(lock).servers["contained"]
    # the server's own socket, made while the connect call was in flight, whose arguments
    # name no address (a port number names nothing): the server's approval, as whichever
    # call it falls in (issue 37, item 4)
    assert f"127.0.0.1:{port}" in server.startup.destinations
    assert f"127.0.0.1:{port}" not in server.tools["connect"].boundary.destinations
    return Setup(home, lock, ws, port, other, done.stdout)


def _review(home: Home, sid: str, *opts: str) -> str:
    """Review of a contained session: its refused execs are MCS410 (medium), so exit 1."""
    done = mcpshim(home, "review", "--session", sid, *opts)
    assert done.returncode == 1, done.stderr
    return done.stdout


@needs_trace
def test_a_contained_session_is_held_to_its_approval(approved: Setup, tmp_path: Path) -> None:
    home, ws = approved.home, approved.ws
    copied = tmp_path / "tools" / "mytouch"
    copied.parent.mkdir()
    shutil.copy("/usr/bin/touch", copied)
    marker, outside = tmp_path / "copied-ran", tmp_path / "outside.txt"
    sid, out = run_mcp(
        home,
        SERVER,
        _calls(
            _call("run", argv=["git", "--version"]),
            _call("run", argv=[str(copied), str(marker)]),
            _call("run", argv=["./build.sh"], cwd=str(ws)),
            _call("run", argv=["sh", "build.sh"], cwd=str(ws)),
            _call("write", path=str(outside)),
            _call("write", path=str(ws / "inside.txt")),
            _call("connect", port=approved.other_port),
            _call("connect", port=approved.approved_port),
            _call("run", argv=["ls", str(ws)]),  # a shim, but a program the lock lacks
        ),
        "--name",
        "contained",
        "--lock",
        str(approved.lock),
        "--contain",
        "--contain-write",
        str(ws),
    )
    assert out[0].startswith("status 0: git version")  # approved: runs as before
    assert out[1] == "error: Permission denied" and not marker.exists()  # never ran
    assert out[2] == "error: Permission denied"  # ./build.sh: the lock did not approve it
    assert out[3] == "status 0: built"  # sh build.sh: the approved sh reads it
    assert out[4] == "error: Permission denied" and not outside.exists()
    assert out[5] == "written"
    assert out[6] == "error: Permission denied"  # a port the lock does not list
    assert out[7] == "connected"
    assert out[8].startswith("status 126:")  # the ls shim ran; its exec of ls was refused

    [start] = events(home, "session-start", sid)
    contain = start["contain"]
    assert contain["state"] == "landlock" and contain["abi"] == ABI
    # reading is held where credential files the lock does not list are on the machine:
    # none in this HOME; the user's own outside it (/root/.npmrc on the CI machine), if any
    held = ["read"] if contain["read_refused"] else []
    assert contain["restricts"] == ["execute", "write", "connect", *held]
    assert not [p for p in contain["read_refused"] if p.startswith(home.env["HOME"])]
    assert contain["connect"] == [approved.approved_port]
    blocked = [e for e in events(home, "trace-exec", sid) if e.get("blocked")]
    ls = os.path.realpath(shutil.which("ls") or "/bin/ls")
    assert sorted(e["filename"] for e in blocked) == sorted([str(copied), "./build.sh", ls])
    assert events(home, "trace-connect", sid) == []  # one record per fact: the trace-net's
    [refused] = [e for e in events(home, "trace-net", sid) if e.get("blocked")]
    assert (refused["address"], refused["port"]) == ("127.0.0.1", approved.other_port)
    assert refused["outcome"] == "denied" and refused["errno"] == "EACCES"

    text = _review(home, sid)
    assert "contained (Landlock ABI" in text
    for call, what in (
        ("(id 4)", f"blocked by the lock: exec of {copied} refused (EACCES)"),
        ("(id 5)", "blocked by the lock: exec of ./build.sh (in"),
        ("(id 9)", f"connect to 127.0.0.1:{approved.other_port} refused (EACCES)"),
        ("(id 11)", f"blocked by the lock: exec of {ls} refused (EACCES)"),
    ):
        section = text.split(f"tools/call {'connect' if 'connect' in what else 'run'} {call}")[1]
        assert what in section.split("\n== ")[0], section
    doc = json.loads(_review(home, sid, "--format", "json"))
    [coverage] = doc["coverage"]
    assert coverage["contain"]["status"] == "landlock" and coverage["contain"]["abi"] == ABI
    findings = doc["findings"]
    mine = [f for f in findings if f["rule"] == "MCS410"]
    assert {f["call"]["name"] for f in mine} == {"run", "connect"} and len(mine) == 4
    sarif = json.loads(_review(home, sid, "--format", "sarif"))
    assert sum(r["ruleId"] == "MCS410" for r in sarif["runs"][0]["results"]) == 4
    report = mcpshim(home, "report", "--session", sid, "--format", "md").stdout
    assert report.count("blocked by the lock") >= 4
    lock_review = _review(home, sid, "--lock", str(approved.lock))
    assert lock_review.count("MCS410 blocked-by-lock") == 4
    assert "MCS530" not in lock_review  # ls never ran: no "new executable" for it

    [trace] = traces_of(home, sid)
    spans = [
        ev.attributes
        for span in trace.spans
        for ev in span.events
        if ev.attributes.get("mcpshim.finding.rule.id") == "MCS410"
    ]
    assert len(spans) == 4


def test_the_card_says_what_an_approved_interpreter_allows(approved: Setup) -> None:
    card = approved.approval.split("-- tool run", 1)[1].split("-- tool", 1)[0]
    assert "/usr/bin/sh" in card
    assert "an interpreter: approving it approves any shell script or command line" in card
    assert "server program" in approved.approval and "any script or code" in approved.approval


def _lock_without(tmp_path: Path) -> Path:
    path = tmp_path / "empty.lock"
    path.write_text(dumps_lock(Lock()))
    return path


def test_contain_refuses_without_a_lock_entry_and_auto_runs_uncontained(
    home: Home, tmp_path: Path
) -> None:
    lock = _lock_without(tmp_path)
    done = run(home, ["/bin/true"], "--lock", str(lock), "--contain", capture_output=True)
    assert done.returncode == 2
    err = done.stderr.decode().strip().splitlines()
    assert err[-1].startswith("mcpshim: error: --contain:") and "has no entry" in err[-1]
    assert not events(home, "session-start")  # nothing was started
    done = run(home, ["/bin/true"], "--lock", str(lock), "--contain=auto", capture_output=True)
    assert done.returncode == 0
    assert b"mcpshim: warning: not contained:" in done.stderr
    [start] = events(home, "session-start", only_session(home))
    assert start["contain"]["state"] == "unavailable"
    text = mcpshim(home, "review", "--session", start["session"]).stdout
    assert "; not contained (" in text and "has no entry" in text
    bad = run(home, ["/bin/true"], "--contain-write", str(tmp_path), capture_output=True)
    assert bad.returncode == 2 and b"--contain-write needs --contain" in bad.stderr


def test_contain_refuses_a_server_program_the_lock_did_not_approve(
    approved: Setup, tmp_path: Path
) -> None:
    done = run(approved.home, ["/bin/true"], "--name", "contained", "--lock",
               str(approved.lock), "--contain", capture_output=True)  # fmt: skip
    assert done.returncode == 2
    assert b"--contain: the server's program /bin/true is not one" in done.stderr


def test_contain_refuses_on_a_kernel_without_landlock(home: Home, tmp_path: Path) -> None:
    """A seccomp filter makes landlock_create_ruleset fail with ENOSYS, as a kernel without
    Landlock does; --contain says so in one line and starts nothing, auto runs."""
    deny = NO_LANDLOCK_PRELUDE + "os.execv(sys.argv[1], sys.argv[1:])"
    lock = _lock_without(tmp_path)
    base = [sys.executable, "-c", deny, *MCPSHIM, "run", "--dir", str(home.loc.shim_dir)]
    for mode, status in (("--contain", 2), ("--contain=auto", 0)):
        argv = [*base, "--lock", str(lock), mode, "--", "/bin/true"]
        done = subprocess.run(argv, env=home.env, capture_output=True, timeout=120, check=False)
        assert done.returncode == status, done.stderr
        assert b"this kernel has no usable Landlock" in done.stderr
    [start] = events(home, "session-start")
    assert "no usable Landlock" in start["contain"]["reason"]
    assert os.uname().sysname == "Linux"
