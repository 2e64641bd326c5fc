"""The contract and the lock without a live session: canonical hashes, what the recorder
files about a server's listings, the lock's round trip and merge, the enforcing relay's
verdicts and its line handling (real pipes), identity lookups."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from mcpshim.contract.canon import definition_hash
from mcpshim.contract.identity import Identities
from mcpshim.contract.lockfile import (
    Boundary,
    Executable,
    Lock,
    ServerApproval,
    ToolApproval,
    default_path,
    dumps_lock,
    find_lock,
    load_lock,
    loads_lock,
    save_lock,
    select_server,
)
from mcpshim.contract.lockmerge import merge
from mcpshim.errors import InputError
from mcpshim.relay.core import C2S, MAX_MESSAGE, S2C, Recorder
from mcpshim.relay.gate import REFUSED_CODE, Gate, GatedRelay, Lines
from tests.fixtures.home import REPO

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
TOOL = {"name": "t", "description": "Do t.", "inputSchema": {"type": "object"}}


def _server(**tools: str) -> ServerApproval:
    b = Boundary(
        (Executable("/usr/bin/git", "ab" * 32, "dpkg package git 1", ("PATH",), ("", "status")),),
        ("/work/repo",),
        ("example.org:443",),
        ("127.0.0.1",),
        ("GITHUB_TOKEN",),
        ("dev",),
        True,
    )
    return ServerApproval(
        "srv",
        ("node", "server.js"),
        "srv-self",
        "1.0",
        "2025-06-18",
        "cd" * 32,
        'Say "hi".\n\tTabs, ünïcödé, \\ and a lone \udcff byte',
        "S1",
        "2026-01-01T00:00:00Z",
        Executable("/usr/bin/node", "ef" * 32, "dpkg package nodejs 20", ("absolute path",), ()),
        b,
        {n: ToolApproval(n, sha, f"{n}'s\ndescription", True, b) for n, sha in tools.items()},
        {"demo://readme": "01" * 32},
        {"review": "02" * 32},
    )


def test_the_lock_round_trips_byte_for_byte(tmp_path: Path) -> None:
    lock = Lock({"srv": _server(t="aa" * 32, **{'weird name.with "quotes"': "bb" * 32})})
    text = dumps_lock(lock)
    again = loads_lock(text)
    assert dumps_lock(again) == text
    path = tmp_path / "mcpshim.lock"
    save_lock(again, path)
    assert path.read_text() == text and oct(path.stat().st_mode & 0o777) == "0o644"
    back = load_lock(path).servers["srv"]
    assert back.tools["t"].boundary.executables[0].shapes == ("", "status")
    assert back.program is not None and back.program.path == "/usr/bin/node"
    assert back.instructions.endswith("lone \\xff byte")  # kept as text, not lost
    assert text.startswith("# mcpshim.lock") and "\nversion = 1\n" in text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version = 2\n", "lock key version: expected 1"),
        ("version = 1\n[servers.s]\ncommand = 'x'\n", "servers.s.command: expected a list"),
        ("version = 1\n[servers.s.tools.t]\ncalled = 'yes'\n", "tools.t.called: expected true"),
        ("version = 1\n[[servers.s.startup.executables]]\nsha256 = ''\n", "path: expected a path"),
        ("version = [\n", "not a valid lock"),
    ],
)
def test_a_malformed_lock_is_an_input_error(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message.replace(".", r"\.")):
        loads_lock(text, "L")


def test_merge_adds_and_says_what_it_adds() -> None:
    old = Lock({"srv": _server(t="aa" * 32)})
    new = _server(t="ff" * 32, u="cc" * 32)
    b = new.tools["t"].boundary
    wider = Boundary(
        (
            *b.executables,
            Executable("/bin/sh", "12" * 32, "dpkg package dash", ("PATH",), ("-c git",)),
        ),
        ("/work/repo/sub", "/tmp/x"),
        b.destinations,
        b.listens,
        (*b.credential_env, "AWS_SECRET_ACCESS_KEY"),
        b.users,
        b.outlives,
    )
    tools = {**new.tools, "t": ToolApproval("t", "ff" * 32, "new words", True, wider)}
    merged, said = merge(old, ServerApproval(**{**new.__dict__, "tools": tools}))
    t = merged.servers["srv"].tools["t"]
    assert [e.path for e in t.boundary.executables] == ["/bin/sh", "/usr/bin/git"]
    assert t.boundary.cwd_roots == ("/tmp/x", "/work/repo")  # /work/repo/sub is covered
    assert "tool t: definition sha256:aaaaaaaaaaaa -> sha256:ffffffffffff" in said
    assert any(s.startswith("tool t: executable /bin/sh") for s in said)
    assert "tool t: cwd root /tmp/x" in said
    assert "tool t: credential-like variable AWS_SECRET_ACCESS_KEY" in said
    assert any(s.startswith("tool u: new (called)") for s in said)
    # Merging what is already there says nothing.
    assert merge(merged, merged.servers["srv"])[1] == []


def test_lock_lookup_next_to_the_client_config(tmp_path: Path, monkeypatch: Any) -> None:
    project = tmp_path / "proj"
    (project / "src" / "deep").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert find_lock(project / "src" / "deep") is None
    # no lock, no client config: a new lock goes here, where --lock mcpshim.lock finds it
    assert default_path(project / "src" / "deep") == project / "src" / "deep" / "mcpshim.lock"
    user = tmp_path / "cfg" / "mcpshim" / "mcpshim.lock"
    user.parent.mkdir(parents=True)
    user.write_text("version = 1\n")
    assert find_lock(project / "src" / "deep") == default_path(project / "src" / "deep") == user
    user.unlink()
    (project / ".mcp.json").write_text("{}")
    assert default_path(project / "src" / "deep") == project / "mcpshim.lock"
    (project / "mcpshim.lock").write_text("version = 1\n")
    assert find_lock(project / "src" / "deep") == project / "mcpshim.lock"


def test_select_server() -> None:
    lock = Lock({"a": _server(), "b": ServerApproval("b", ("python3", "b.py"), "bee")})
    assert select_server(lock, "a") is lock.servers["a"]
    assert select_server(lock, "", ["python3", "b.py"]) is lock.servers["b"]
    assert select_server(lock, "", ["x"], "bee") is lock.servers["b"]
    assert select_server(lock, "c", ["x"], "nobody") is None


# ---- what the recorder files -----------------------------------------------------------------


def test_the_recorder_files_the_contract_and_hashes_responses() -> None:
    got: list[tuple[str, dict[str, Any]]] = []
    rec = Recorder(lambda k, p: got.append((k, p)), "S")
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"clientInfo": {"name": "cli", "version": "1"}}}  # fmt: skip
    rec.message(C2S, 1.0, json.dumps(init).encode())
    result = {"protocolVersion": "2025-06-18", "serverInfo": {"name": "s", "version": "2"},
              "capabilities": {"tools": {}}, "instructions": f"use {TOKEN}"}  # fmt: skip
    rec.message(S2C, 1.1, json.dumps({"jsonrpc": "2.0", "id": 0, "result": result}).encode())
    rec.message(C2S, 2.0, b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
    secret_tool = {**TOOL, "description": f"Do t with {TOKEN}.", "_meta": {"x": 1}}
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        "tools": [secret_tool], "nextCursor": "p2"}}).encode()  # fmt: skip
    rec.message(S2C, 2.1, line)
    rec.message(
        C2S, 3.0, b'{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"p2"}}'
    )
    rec.message(S2C, 3.1, b'{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"no"}}')
    rec.message(C2S, 4.0, b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t"}}')
    answer = b'{"jsonrpc":"2.0","id":3,"result":{"content":[]}}'
    rec.message(S2C, 4.1, answer)
    kinds = [k for k, _ in got]
    assert kinds == ["mcp-initialize", "mcp-tools", "mcp-request", "mcp-response"]
    i = got[0][1]
    assert (i["server_name"], i["server_version"], i["client_name"]) == ("s", "2", "cli")
    assert TOKEN not in json.dumps(got) and "[REDACTED" in i["instructions"]
    tools = got[1][1]
    [row] = tools["tools"]
    assert row["sha256"] == definition_hash("tool", TOOL | {"description": f"Do t with {TOKEN}."})
    assert "_meta" not in row["definition"] and tools["next_cursor"] == "p2"
    assert tools["cursor"] is None and tools["sha256"] == hashlib.sha256(line).hexdigest()
    assert got[3][1]["sha256"] == hashlib.sha256(answer).hexdigest()
    assert got[3][1]["size"] == len(answer)


# ---- the enforcing relay ---------------------------------------------------------------------


def test_lines_hold_partial_lines_and_pass_overlong_ones_through() -> None:
    lines = Lines()
    assert list(lines.feed(b'{"a":')) == []
    assert list(lines.feed(b"1}\n{}\n{")) == [(b'{"a":1}\n', True), (b"{}\n", True)]
    assert lines.rest() == b"{"
    big = Lines()
    out = list(big.feed(b"x" * (MAX_MESSAGE + 1)))
    assert [w for _, w in out] == [False]
    assert list(big.feed(b"yy\nz\n")) == [(b"yy\n", False), (b"z\n", True)]


def _gate(lock: Lock, events: list[tuple[str, dict[str, Any]]]) -> Gate:
    return Gate(lock, "L", "", ["node", "server.js"], lambda k, p: events.append((k, p)), "S")


def test_gate_verdicts() -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    ok_hash = definition_hash("tool", TOOL)
    gate = _gate(Lock({"srv": _server(t=ok_hash, gone="99" * 32)}), events)
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "t"}}
    err = gate.request(call)
    assert err is not None and "not listed in this session" in err["message"]
    assert gate.request({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}) is None
    assert gate.waiting
    gate.response({"jsonrpc": "2.0", "id": 6, "result": {"tools": [TOOL, {"name": "new"}]}})
    assert gate.request(call) is None
    err = gate.request({**call, "params": {"name": "new"}})
    assert err is not None and "not approved for server srv" in err["message"]
    # The server changes the tool's description: refused, with both hashes.
    assert gate.request({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}) is None
    gate.response({"jsonrpc": "2.0", "id": 7, "result": {"tools": [{**TOOL, "description": "!"}]}})
    err = gate.request(call)
    assert err is not None and err["code"] == REFUSED_CODE
    assert "definition changed since it was approved" in err["message"]
    assert err["data"]["approved_sha256"] == ok_hash
    assert [p["reason"][:20] for k, p in events if k == "mcp-refused"] == [
        "it was not listed in",
        "it is not approved f",
        "its definition chang",
    ]
    stranger = _gate(Lock({}), events)
    err = stranger.request(call)
    assert err is not None and "no entry in the lock" in err["message"]


def test_gated_relay_answers_refused_calls_and_passes_the_rest(tmp_path: Path) -> None:
    """Real pipes: a client writes, a fake server answers; a refused call never reaches the
    server, an approved one does, and the client's stream stays whole lines."""
    events: list[tuple[str, dict[str, Any]]] = []
    gate = _gate(Lock({"srv": _server(t=definition_hash("tool", TOOL))}), events)
    got: list[tuple[str, dict[str, Any]]] = []
    relay = GatedRelay(Recorder(lambda k, p: got.append((k, p)), "S"), gate)
    c_in_r, c_in_w = os.pipe()
    s_in_r, s_in_w = os.pipe()
    s_out_r, s_out_w = os.pipe()
    c_out_r, c_out_w = os.pipe()
    relay.start(c_in_r, s_in_w, s_out_r, c_out_w)
    server_saw: list[bytes] = []

    def fake_server() -> None:
        with os.fdopen(s_in_r, "rb") as src, os.fdopen(s_out_w, "wb", buffering=0) as dst:
            for line in src:
                server_saw.append(line)
                msg = json.loads(line)
                answers = [
                    {"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [TOOL]}}
                    if m.get("method") == "tools/list"
                    else {"jsonrpc": "2.0", "id": m["id"], "result": {"content": ["x" * 99_999]}}
                    for m in (msg if isinstance(msg, list) else [msg])
                ]
                reply = json.dumps(answers if isinstance(msg, list) else answers[0])
                half = len(reply) // 2  # a response in two writes: nothing may land between
                dst.write(reply[:half].encode())
                dst.write(reply[half:].encode() + b"\n")

    th = threading.Thread(target=fake_server)
    th.start()
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t"}},
        [{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope"}},
         {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "t"}}],
    ]  # fmt: skip
    with os.fdopen(c_out_r, "rb") as out:
        for req in requests:
            os.write(c_in_w, json.dumps(req).encode() + b"\n")
            replies = [json.loads(out.readline()) for _ in range(2 if isinstance(req, list) else 1)]
            if req is requests[1]:
                assert replies[0]["result"]["tools"][0]["name"] == "t"
            elif req is requests[0]:
                assert replies[0]["error"]["code"] == REFUSED_CODE
        os.close(c_in_w)
        assert out.read() == b""
    th.join(5)
    relay.server_done(5)
    relay.finish()
    sent = [json.loads(line) for line in server_saw]
    assert [s["id"] if isinstance(s, dict) else [i["id"] for i in s] for s in sent] == [2, 3, [5]]
    assert [p["tool"] for k, p in events if k == "mcp-refused"] == ["t", "nope"]
    # Recorded as the client sent it: every call, and the refused ones' error answers.
    calls = [p["id"] for k, p in got if k == "mcp-request"]
    errors = [p["id"] for k, p in got if k == "mcp-response" and p["error_code"] == REFUSED_CODE]
    assert calls == [1, 3, 4, 5] and errors == [1, 4]


def test_identities_ask_the_package_manager_once_per_batch(tmp_path: Path) -> None:
    mine = tmp_path / "tool"
    mine.write_bytes(b"#!/bin/sh\n")
    ids = Identities()
    paths = ["/bin/sh", "/usr/bin/sh", str(mine), str(tmp_path / "gone")]
    found = ids.lookup(paths)
    assert ids.queries <= 2
    assert found[str(mine)].sha256 == hashlib.sha256(b"#!/bin/sh\n").hexdigest()
    assert (
        found[str(mine)].vouched.startswith("unowned, in a directory")
        and not found[str(mine)].owned
    )
    assert found[str(tmp_path / "gone")].sha256 == ""
    if ids.queries:  # a package manager is present (dpkg here): /bin/sh is a package's
        assert found["/bin/sh"].owned and found["/usr/bin/sh"].owned
        assert "content matches" in found["/bin/sh"].vouched
    before = ids.queries
    ids.lookup(paths)
    assert ids.queries == before  # cached


@pytest.mark.alone  # a wall-time bound: a loaded machine would break it
def test_approve_on_a_thousand_execs_is_not_quadratic(tmp_path: Path, monkeypatch: Any) -> None:
    """A generous guard on the command's own work, in this process, on the log
    benchmarks/approve_scale.py writes: a pass over every exec per exec took minutes. The
    issue's 2 s is that benchmark's figure (a timed test at the bound flaked under load)."""
    import time

    from click.testing import CliRunner

    from mcpshim.cli import cli
    from tests.fixtures.benchmod import load_benchmark

    bench = load_benchmark("approve_scale")
    bench.generate(tmp_path / "log", 1000)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # approve's identities
    lock = tmp_path / "l.lock"
    argv = ["approve", "--dir", str(tmp_path / "shims"), "--log-dir", str(tmp_path / "log")]
    argv += ["--session", bench.SESSION, "--lock", str(lock), "--yes"]
    t0 = time.perf_counter()
    done = CliRunner().invoke(cli, argv, standalone_mode=False, catch_exceptions=False)
    wall = time.perf_counter() - t0
    assert done.return_value == 0 and lock.exists()
    [run_test] = [t for t in load_lock(lock).servers["bench"].tools.values() if t.called]
    assert len(run_test.boundary.executables) == 4  # npm, node, sh, git: 1,000 execs, 4 programs
    assert wall < 20.0, wall


def test_the_documented_example_is_a_valid_lock() -> None:
    doc = (REPO / "docs" / "lock-format.md").read_text()
    example = doc.split("```toml\n", 1)[1].split("```", 1)[0]
    lock = loads_lock(example, "docs/lock-format.md")
    repo = lock.servers["repo"]
    assert repo.program is not None and repo.program.path == "/usr/bin/node"
    assert [e.path for e in repo.tools["run_test"].boundary.executables] == [
        "/usr/bin/npm",
        "/usr/bin/sh",
    ]


#: server-controlled text a terminal or a diff would act on or hide (issue 28, item 10)
HIDDEN = "\u202e\u2066\u009b\u0085\u2028\u2029\u200b\x1b\U000e0001"


def test_hidden_characters_are_escaped_and_the_lock_still_matches_what_it_pins(
    tmp_path: Path,
) -> None:
    name = f"run{HIDDEN}tset"
    srv = _server(**{name: "aa" * 32})
    srv = dataclasses.replace(
        srv,
        name=f"srv{HIDDEN}",
        server_name=f"self{HIDDEN}",
        instructions=f"Use {HIDDEN} me",
        tools={n: dataclasses.replace(t, description=f"d{HIDDEN}") for n, t in srv.tools.items()},
    )
    lock = Lock({srv.name: srv})
    path = tmp_path / "mcpshim.lock"
    save_lock(lock, path)
    raw = path.read_bytes().decode("utf-8")
    assert not [c for c in HIDDEN if c in raw]  # none of them raw in the file
    assert raw.isascii() and "\\u202e" in raw and "\\U000e0001" in raw
    back = load_lock(path)
    assert back.servers == lock.servers  # every text exactly as it was
    assert dumps_lock(back) == raw
    approved = select_server(back, server_name=f"self{HIDDEN}")
    assert approved is not None and approved.tools[name].description == f"d{HIDDEN}"
    # the gate holds the listed tool of that name to its approval
    tool = {**TOOL, "name": name}
    pinned = dataclasses.replace(approved.tools[name], sha256=definition_hash("tool", tool))
    held = dataclasses.replace(approved, command=("node", "server.js"), tools={name: pinned})
    gate = _gate(Lock({srv.name: held}), [])
    gate.request({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    gate.response({"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool]}})
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name}}
    assert gate.request(call) is None
