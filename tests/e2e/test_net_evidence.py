"""Network evidence from the kernel, end to end (issue 29 items 2 and 3): the SDK's client
drives a real SDK server through the real `mcpshim run --mcp` (traced, the default), and
each tool call runs a real process that touches the network and is gone long before any
sample: a python that connects to a local listener and exits at once, curl against a port
nothing listens on (refused: it reached nothing), a UDP datagram to a local port, a
listener opened and closed inside the call, a Unix socket connect. Each fact is asserted
under its call in review's JSON and text, in the report, on the approval card and in the
OTLP spans; an untraced session says its network evidence is sampled."""

from __future__ import annotations

import json
import shutil
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession

from mcpshim.contract.lockfile import load_lock
from tests.fixtures.approvescenario import run_mcp
from tests.fixtures.home import FIXTURES, Home
from tests.fixtures.nethelp import free_port, listening
from tests.fixtures.otelscenario import traces_of
from tests.fixtures.runhelp import command as mcpshim
from tests.fixtures.runhelp import needs_trace

SERVER = [sys.executable, str(FIXTURES / "mcp_contain_server.py")]
#: a DNS query for mcpshim-test.invalid (A), sent to a resolver on 127.0.0.1:53
DNS_QUERY = (
    "import socket,struct\n"
    "q = struct.pack('>HHHHHH', 0x1234, 0x100, 1, 0, 0, 0)\n"
    "q += bytes([12]) + b'mcpshim-test' + bytes([7]) + b'invalid' + bytes([0])\n"
    "socket.socket(2, 2).sendto(q + struct.pack('>HH', 1, 1), ('127.0.0.1', 53))\n"
)
CURL = shutil.which("curl")
pytestmark = needs_trace


@dataclass(frozen=True)
class Net:
    home: Home
    sid: str
    listener: int  # a TCP listener outside the family
    closed: int  # a port nothing listens on
    udp: int  # a UDP port the datagram goes to
    lport: int  # the port a tool listens on
    unix: str  # a Unix socket outside the family
    out: list[str]


@pytest.fixture
def unix_listener(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "agent.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(8)

    def loop() -> None:
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            c.close()

    threading.Thread(target=loop, daemon=True).start()
    yield path
    srv.close()


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _script(calls: list[list[str]]) -> Any:
    async def script(s: ClientSession) -> list[str]:
        await s.list_tools()
        out = []
        for argv in calls:
            result = await s.call_tool("run", {"argv": argv})
            out.append(result.content[0].text if result.content else "")  # type: ignore[union-attr]
        return out

    return script


@pytest.fixture
def net(home: Home, unix_listener: str) -> Iterator[Net]:
    assert CURL is not None
    closed, udp, lport = free_port(), free_port(), free_port()
    with listening() as port:
        calls = [
            # connects and exits at once: no sample can see it
            _py(f"import os,socket;socket.create_connection(('127.0.0.1',{port}));os._exit(0)"),
            [CURL, "-sS", "--max-time", "5", f"http://127.0.0.1:{closed}/"],
            _py(f"import socket;socket.socket(2,2).sendto(b'ping',('127.0.0.1',{udp}))"),
            _py(f"import socket;s=socket.socket();s.bind(('127.0.0.1',{lport}));s.listen()"),
            _py(f"import socket;socket.socket(socket.AF_UNIX).connect({unix_listener!r})"),
            _py(DNS_QUERY),
        ]
        sid, out = run_mcp(home, SERVER, _script(calls), "--name", "net")
    yield Net(home, sid, port, closed, udp, lport, unix_listener, out)


def _block(text: str, call: int) -> str:
    """Review text's block of the call with JSON-RPC id `call`."""
    return text.split(f"tools/call run (id {call})")[1].split("\n== ", maxsplit=1)[0]


def test_each_call_says_what_the_kernel_showed(net: Net) -> None:
    home, sid = net.home, net.sid
    assert net.out[0].strip() == "status 0:" and net.out[1].startswith("status 7:"), net.out
    doc = json.loads(mcpshim(home, "review", "--session", sid, "--format", "json").stdout)
    ids = [c["id"] for c in doc["calls"]]
    calls = {c["id"]: c for c in doc["calls"]}
    connect, curl, udp, listen, unix, dns = (calls[i] for i in ids)
    for c in calls.values():
        assert c["network_evidence"] == "traced"

    [made] = [f for f in connect["net"] if f["call"] == "connect"]
    assert (made["destination"], made["outcome"]) == (f"127.0.0.1:{net.listener}", "connected")
    assert made["command"] == "python3" or made["command"].startswith("python")
    assert any(f"connected to 127.0.0.1:{net.listener} (tcp)" in a for a in connect["network"])

    tried = [f for f in curl["net"] if f["kind"] == "tried"]
    assert [(f["destination"], f["outcome"]) for f in tried] == [
        (f"127.0.0.1:{net.closed}", "refused")
    ]
    assert curl["network"] == []  # reached the network: no
    said = f"curl (pid {tried[0]['pid']}) tried 127.0.0.1:{net.closed} (tcp): refused"
    assert curl["tried"] == [said]
    assert any("arguments" in h or f"127.0.0.1:{net.closed}" in h for h in curl["hint"])

    [sent] = [f for f in udp["net"] if f["call"] == "send"]
    assert (sent["destination"], sent["outcome"], sent["transport"]) == (
        f"127.0.0.1:{net.udp}", "sent", "udp",
    )  # fmt: skip
    assert any(f"sent a datagram to 127.0.0.1:{net.udp} (udp)" in a for a in udp["network"])

    [opened] = [f for f in listen["net"] if f["call"] == "listen"]
    assert (opened["outcome"], opened["destination"]) == ("listening", f"127.0.0.1:{net.lport}")
    listens = [f for f in doc["findings"] if f["rule"] == "MCS303"]
    assert [f["call"]["id"] for f in listens] == [ids[3]]

    [sock] = [f for f in unix["net"] if f["family"] == "unix" and f["kind"] == "reached"]
    assert (sock["destination"], sock["outcome"]) == (net.unix, "connected")
    assert any(f"connected to {net.unix} (unix stream)" in a for a in unix["network"])

    [query] = [f for f in dns["net"] if f.get("purpose") == "dns"]
    assert query["queries"] == [{"name": "mcpshim-test.invalid", "type": "A"}]
    lookup = "looked up mcpshim-test.invalid (A) via the resolver 127.0.0.1:53"
    assert any(lookup in a for a in dns["network"]), dns["network"]

    # the policy lists none of these: each observed contact is a finding under its call
    observed = {(f["call"]["id"], f["rule"]) for f in doc["findings"] if f.get("call")}
    assert {(ids[0], "MCS306"), (ids[2], "MCS306"), (ids[4], "MCS306")} <= observed
    assert (ids[1], "MCS307") in observed  # curl's attempt, said as one
    [hint] = [f for f in doc["findings"] if f["rule"] == "MCS108"]  # curl's URL: a hint
    assert hint["severity"] == "info" and "arguments name" in hint["message"]
    assert not [f for f in doc["findings"] if f["rule"] in ("MCS304",)]  # no sampled guess
    [coverage] = doc["coverage"]
    assert coverage["network"]["status"] == "traced"

    text = mcpshim(home, "review", "--session", sid).stdout
    assert f"connected to 127.0.0.1:{net.listener} (tcp)" in _block(text, ids[0])
    block = _block(text, ids[1])
    assert "reached the network: no" in block
    assert f"tried 127.0.0.1:{net.closed} (tcp): refused" in block
    assert f"sent a datagram to 127.0.0.1:{net.udp} (udp)" in _block(text, ids[2])
    assert f"listened on 127.0.0.1:{net.lport} (tcp)" in _block(text, ids[3])
    assert f"connected to {net.unix} (unix stream)" in _block(text, ids[4])
    assert lookup in _block(text, ids[5])
    assert "network: traced" in text

    report = mcpshim(home, "report", "--session", sid, "--format", "md").stdout
    report = report.replace("\\_", "_")  # Markdown's escapes of the path's underscores
    for said in (f"connected to 127.0.0.1:{net.listener}", f"tried 127.0.0.1:{net.closed}",
                 f"sent a datagram to 127.0.0.1:{net.udp}", "listened on 127.0.0.1:",
                 f"connected to {net.unix}"):  # fmt: skip
        assert said in report, said
    page = mcpshim(home, "report", "--session", sid, "--format", "html", "-o", "-").stdout
    assert f"network: connected to 127.0.0.1:{net.listener} (tcp)" in page
    assert f"network: tried 127.0.0.1:{net.closed} (tcp): refused" in page

    [trace] = traces_of(home, sid)
    by_peer = {
        (s.attributes.get("network.peer.address"), s.attributes.get("network.peer.port")): s
        for s in trace.spans
        if "network.peer.address" in s.attributes
    }
    span = by_peer[("127.0.0.1", net.listener)]
    assert span.attributes["network.transport"] == "tcp"
    assert span.attributes["mcpshim.network.outcome"] == "connected"
    events = [e for s in trace.spans for e in s.events if e.name == "mcpshim.network"]
    got = {(e.attributes.get("network.peer.address"), e.attributes.get("network.peer.port"),
            e.attributes["mcpshim.network.outcome"]) for e in events}  # fmt: skip
    assert ("127.0.0.1", net.closed, "refused") in got
    assert ("127.0.0.1", net.udp, "sent") in got
    assert (net.unix, None, "connected") in got
    unix_ev = next(e for e in events if e.attributes.get("network.peer.address") == net.unix)
    assert unix_ev.attributes["network.transport"] == "unix"
    assert unix_ev.attributes["server.address"] == net.unix
    [opened] = [e for e in events if e.attributes["mcpshim.network.call"] == "listen"]
    assert opened.attributes["network.local.address"] == "127.0.0.1"
    assert opened.attributes["network.local.port"] == net.lport
    refused = by_peer[("127.0.0.1", net.closed)]  # curl's span: its one attempt
    assert refused.name == "curl" and refused.attributes["mcpshim.network.reached"] is False


def test_the_approval_card_lists_observed_destinations(net: Net, tmp_path: Path) -> None:
    lock = tmp_path / "mcpshim.lock"
    done = mcpshim(net.home, "approve", "--session", net.sid, "--lock", str(lock), "--yes")
    assert done.returncode == 0, done.stderr
    card = done.stdout.split("-- tool run", 1)[1].split("-- tool", 1)[0]
    assert f"connected to 127.0.0.1:{net.listener}" in card
    assert f"tried 127.0.0.1:{net.closed}: refused" in card
    assert f"127.0.0.1:{net.udp} (udp)" in card
    assert "listens on 127.0.0.1" in card
    assert net.unix in card
    tool = load_lock(lock).servers["net"].tools["run"]
    assert f"127.0.0.1:{net.listener}" in tool.boundary.destinations
    assert f"127.0.0.1:{net.closed}" not in tool.boundary.destinations  # never reached

    # the next session's python reaches another destination: a departure, seen by the kernel
    with listening() as other:
        code = f"import os,socket;socket.create_connection(('127.0.0.1',{other}));os._exit(0)"
        sid, _ = run_mcp(net.home, SERVER, _script([_py(code)]), "--name", "net")
    review = mcpshim(net.home, "review", "--session", sid, "--lock", str(lock))
    assert review.returncode == 1, review.stderr
    said = f"connected to 127.0.0.1:{other}, which its card does not list"
    assert said in review.stdout and "MCS534 departure-new-destination" in review.stdout


def test_an_untraced_session_says_its_network_evidence_is_sampled(home: Home) -> None:
    from tests.fixtures.runhelp import only_session, run

    assert run(home, _py("pass"), "--no-trace").returncode == 0
    sid = only_session(home)
    doc = json.loads(mcpshim(home, "review", "--session", sid, "--format", "json").stdout)
    [coverage] = doc["coverage"]
    assert coverage["network"]["status"] == "sampled"
    text = mcpshim(home, "review", "--session", sid).stdout
    assert "network: sampled (only sockets open when the sampler looked" in text
