"""The MCP stdio relay: bytes through unchanged, calls recorded, secrets redacted."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpshim.log import eventlog
from mcpshim.log.events import MAX_EVENT_DEPTH
from mcpshim.relay.channel import DIRECTIONS
from mcpshim.relay.core import C2S, S2C, Dropped, Recorder, Transcriber
from mcpshim.relay.forked import replay_loss
from mcpshim.relay.loss import LINE_KEEP, Loss
from mcpshim.relay.recordable import CUT
from mcpshim.relay.redact import redact_json
from tests.fixtures import byte_server
from tests.fixtures.home import FIXTURES, Home, install
from tests.fixtures.runhelp import events

FIX = FIXTURES
RELAYHOST = FIX / "relayhost.py"
TOOLS = FIX / "mcp_tools_server.py"
ISO_US = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$")
TOKEN = "ghp_" + "Q" * 36


def relay_argv(home: Home, session: str, command: list[str], record: bool = True) -> list[str]:
    log = str(home.loc.log_dir) if record else "-"
    return [sys.executable, str(RELAYHOST), str(home.loc.shim_dir), log, session, "--", *command]


async def _drive(params: StdioServerParameters) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        out["tools"] = sorted(t.name for t in (await s.list_tools()).tools)
        r = await s.call_tool("git_version", {})
        out["git"] = r.content[0].text  # type: ignore[union-attr]
        r = await s.call_tool("shell", {"line": f"echo {TOKEN}", "password": "hunter2"})
        out["shell_error"] = r.is_error
        r = await s.call_tool("shell", {"line": f"echo {TOKEN}"})
        out["echo"] = r.content[0].text  # type: ignore[union-attr]
        out["resource"] = (await s.read_resource("demo://readme")).contents[0].text  # type: ignore[union-attr]
        prompt = await s.get_prompt("review_prompt", {"topic": "relay"})
        out["prompt"] = prompt.messages[0].content.text  # type: ignore[union-attr]
        r = await s.call_tool("no_such_tool", {})
        out["missing_error"] = r.is_error
    return out


def test_sdk_client_and_server_through_the_relay(home: Home) -> None:
    install(home, ["git", "sh"])
    cmd = relay_argv(home, "S-sdk", [sys.executable, str(TOOLS)])
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=home.env)
    out = anyio.run(_drive, params)
    # The SDK's client and server worked through the relay.
    assert "git_version" in out["tools"] and "shell" in out["tools"]
    assert out["git"].startswith("git version")
    assert out["echo"] == TOKEN  # the stream carries the token unchanged...
    assert out["resource"] == "mcpshim fixture resource"
    assert out["prompt"] == "Review relay."
    assert out["shell_error"] is False and out["missing_error"] is True
    # ...the log never holds it.
    raw = home.loc.log_file.read_bytes()
    assert TOKEN.encode() not in raw and b"hunter2" not in raw
    reqs = events(home, "mcp-request", "S-sdk")
    resps = events(home, "mcp-response", "S-sdk")
    assert [(r["method"], r.get("tool") or r.get("uri") or r.get("prompt")) for r in reqs] == [
        ("tools/call", "git_version"),
        ("tools/call", "shell"),
        ("tools/call", "shell"),
        ("resources/read", "demo://readme"),
        ("prompts/get", "review_prompt"),
        ("tools/call", "no_such_tool"),
    ]
    assert reqs[1]["arguments"] == {
        "line": "echo ghp_[REDACTED:github-token]",
        "password": "[REDACTED:credential-name]",
    }
    assert reqs[1]["redacted"] == ["credential-name", "github-token"]
    assert reqs[4]["arguments"] == {"topic": "relay"}
    assert all(r["direction"] == C2S and r["size"] > 0 for r in reqs)
    by_id = {r["id"]: r for r in resps}
    assert len(resps) == len(reqs)
    for req in reqs:
        resp = by_id[req["id"]]
        assert resp["method"] == req["method"] and resp["direction"] == S2C
        assert resp["time"] >= req["time"]
    assert [by_id[r["id"]]["is_error"] for r in reqs] == [False, False, False, False, False, True]
    for ev in reqs + resps:
        assert ISO_US.match(ev["time"]), ev["time"]
        assert ev["session"] == "S-sdk"
    # The processes the tools started went through the shims, under the server.
    [start] = events(home, "session-start", "S-sdk")
    execs = [r for r in home.execs() if r.session == "S-sdk"]
    assert [r.shim for r in execs if r.ppid == start["child_pid"]] == ["git", "sh", "sh"]


def _exchange(argv: list[str], data: bytes) -> bytes:
    done = subprocess.run(argv, input=data, capture_output=True, timeout=120, check=True)
    return done.stdout


def test_byte_transparency_with_and_without_the_relay(home: Home, tmp_path: Path) -> None:
    sent_c, sent_s = byte_server.client_stream(), byte_server.server_stream()
    assert len(sent_c) > 1 << 20 and len(sent_s) > 1 << 20
    want_c = f"{hashlib.sha256(sent_c).hexdigest()} {len(sent_c)}\n"
    want_s = hashlib.sha256(sent_s).hexdigest()
    results = {}
    for mode in ("direct", "relay-only", "relay-recording"):
        out = tmp_path / f"{mode}.txt"
        server = [sys.executable, str(FIX / "byte_server.py"), str(out)]
        argv = server if mode == "direct" else relay_argv(home, mode, server, mode.endswith("ing"))
        got = _exchange(argv, sent_c)
        results[mode] = (hashlib.sha256(got).hexdigest(), out.read_text())
    # Both directions: what each side received is exactly what the other sent, relay or not.
    assert results == {m: (want_s, want_c) for m in results}
    # The copy was parsed: the 1 MiB call recorded (arguments cut, after redaction)...
    reqs = events(home, "mcp-request", "relay-recording")
    assert [r["id"] for r in reqs] == [2, 3, 4, 5]  # 5 ends the stream without a newline
    assert reqs[0]["size"] > 1 << 19
    assert reqs[0]["arguments"]["text"].endswith("more characters not recorded]")
    assert reqs[1]["arguments"] == {"api_key": "[REDACTED:credential-name]"}
    resps = {r["id"]: r for r in events(home, "mcp-response", "relay-recording")}
    assert resps[2]["is_error"] is False and resps[2]["size"] > 1 << 20
    assert resps[3]["is_error"] is True
    assert resps[4]["is_error"] is True and resps[4]["error_code"] == -32601
    # ...and what did not parse was noted, not dropped.
    reasons = [(u["direction"], u["reason"]) for u in events(home, "mcp-unparsed")]
    assert (C2S, "not UTF-8 text") in reasons
    assert any(d == C2S and r.startswith("not JSON") for d, r in reasons)
    assert any(d == S2C and r.startswith("not JSON") for d, r in reasons)
    assert (S2C, "incomplete message at end") in reasons
    assert not events(home, "mcp-request", "relay-only")


def _recorder() -> tuple[Recorder, list[tuple[str, dict[str, Any]]]]:
    got: list[tuple[str, dict[str, Any]]] = []
    return Recorder(lambda k, p: got.append((k, p)), "S"), got


def test_recorder_batches_errors_and_server_requests() -> None:
    rec, got = _recorder()
    rec.message(
        C2S,
        1.0,
        b'[{"jsonrpc":"2.0","id":"a","method":"tools/call","params":'
        b'{"name":"t","arguments":{"x":1}}},'
        b'{"jsonrpc":"2.0","method":"notifications/progress"}]',
    )
    rec.message(S2C, 2.0, b'{"jsonrpc":"2.0","id":"a","error":{"code":-32000,"message":"m"}}')
    rec.message(S2C, 3.0, b'{"jsonrpc":"2.0","id":9,"result":{}}')  # not a tracked request
    rec.message(C2S, 4.0, b'{"jsonrpc":"2.0","id":"a","result":{}}')  # wrong direction
    rec.message(C2S, 5.0, b"[]")
    rec.message(C2S, 6.0, b'"just a string"')
    kinds = [k for k, _ in got]
    assert kinds == ["mcp-request", "mcp-response", "mcp-unparsed", "mcp-unparsed"]
    assert got[0][1]["id"] == "a" and got[0][1]["tool"] == "t"
    assert got[0][1]["time"] == "1970-01-01T00:00:01.000000+00:00"
    assert got[1][1]["is_error"] is True and got[1][1]["error_code"] == -32000
    assert got[2][1]["reason"] == "empty batch"
    assert got[3][1]["reason"] == "not a JSON-RPC object"


def test_recorder_takes_what_json_takes() -> None:
    # Beyond orjson (the fast path) but JSON to Python's json: NaN, a 100-bit integer, a
    # lone surrogate escape, UTF-16 text. Not JSON stays unparsed; not UTF-8 text is noted
    # (MCS505) and recorded as a peer that replaces its bad bytes reads it (`lossy`).
    rec, got = _recorder()
    args = b'{"n":NaN,"big":1267650600228229401496703205376,"s":"\\ud800"}'
    line = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":'
    rec.message(C2S, 1.0, line + args + b"}}")
    wide = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"w"}}'
    rec.message(C2S, 2.0, wide.encode("utf-16"))
    rec.message(C2S, 3.0, b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":"\xff"}')
    rec.message(C2S, 4.0, b'{"jsonrpc":"2.0",')
    kinds = ["mcp-request", "mcp-request", "mcp-unparsed", "mcp-request", "mcp-unparsed"]
    assert [k for k, _ in got] == kinds
    # recorded as the log can hold them: NaN as text, the lone surrogate as its escape
    assert got[0][1]["arguments"] == {"n": "NaN", "big": 2**100, "s": "\\ud800"}
    assert got[1][1]["tool"] == "w"
    assert got[2][1]["reason"] == "not UTF-8 text" and got[2][1]["unreadable"] == "not-utf8"
    assert got[3][1]["id"] == 3 and got[3][1]["lossy"] == "not-utf8"
    assert "lossy" not in got[0][1] and "lossy" not in got[2][1]
    assert got[4][1]["reason"].startswith("not JSON: ")


def test_deep_and_odd_tool_calls_are_recorded_depth_limited(home: Home) -> None:
    """A tools/call nested 500 deep is a tool call: recorded with what lies below 56 levels
    cut (it used to raise RecursionError and end up unparsed), and it reads back from the
    log; 100,000 levels are beyond any JSON parser here: unparsed, said so."""
    rec = Recorder(lambda k, p: eventlog.append_event(home.loc, k, p), "S-deep")
    head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t","arguments":'
    deep = [b"[" * 500 + b"]" * 500, b'{"a":' * 500 + b"1" + b"}" * 500]
    for i, value in enumerate(deep):
        rec.message(C2S, 1.0, head % i + b'{"v":' + value + b"}}}")
    rec.message(C2S, 2.0, head % 7 + b'{"v":[NaN,1e999,"\\udc80"]}}}')
    rec.message(C2S, 3.0, head % 8 + b"[" * 100_000 + b"]" * 100_000 + b"}}")
    assert rec.failures == 0
    reqs = {r["id"]: r for r in events(home, "mcp-request", "S-deep")}  # read back
    assert sorted(reqs) == [0, 1, 7]
    for i in (0, 1):
        text = json.dumps(reqs[i]["arguments"])
        assert CUT in text and text.count("[") + text.count("{") < MAX_EVENT_DEPTH
    assert reqs[7]["arguments"] == {"v": ["NaN", "Infinity", "\\udc80"]}
    [unparsed] = events(home, "mcp-unparsed", "S-deep")
    assert unparsed["reason"] == "not JSON: nested too deeply to parse"


def test_a_gap_in_the_copies_cuts_the_messages_it_touched() -> None:
    # Copies dropped mid-message: the message cut before the gap and the one that goes on
    # after it are counted as not recorded, never taken for garbage (no mcp-unparsed).
    rec, got = _recorder()
    scribe = Transcriber(rec)

    def call(i: int) -> bytes:
        return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t"}}' % i

    one, two, three, four = map(call, (1, 2, 3, 4))
    scribe.feed(C2S, 1.0, one + b"\n" + two[:20])
    lost = Dropped()
    lost.add(two[20:] + b"\n" + three[:30])
    scribe.dropped(C2S, 2.0, lost, "why")
    scribe.feed(C2S, 3.0, three[30:] + b"\n" + four + b"\n")
    scribe.feed(C2S, 4.0, None)
    assert [(k, p.get("id")) for k, p in got] == [
        ("mcp-request", 1),
        ("mcp-unrecorded", None),
        ("mcp-request", 4),
    ]
    assert got[1][1]["bytes"] == len(two) - 20 + 1 + 30 and got[1][1]["messages"] == 2
    assert got[1][1]["reason"] == "why" and got[1][1]["direction"] == C2S


def test_recorder_survives_a_failing_log() -> None:
    def emit(kind: str, payload: dict[str, Any]) -> None:
        raise OSError(28, "No space left on device")

    rec = Recorder(emit, "S")
    rec.message(C2S, 1.0, b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}')
    rec.message(S2C, 2.0, b'{"jsonrpc":"2.0","id":1,"result":{}}')
    assert rec.failures == 2


def test_redact_json_walks_values_and_keys() -> None:
    hits: list[str] = []
    value = {
        "cmd": f"curl -H 'Authorization: Bearer abcdefgh12345' https://u:pw@h/ {TOKEN}",
        "env": {"GITHUB_TOKEN": TOKEN, "HOME": "/root", "AWS_SECRET_ACCESS_KEY": 12345},
        "list": [TOKEN, 1, None, {"password": None}],
        "token": {"nested": "plain"},
    }
    out = redact_json(value, hits)
    text = repr(out)
    assert TOKEN not in text and "abcdefgh12345" not in text and ":pw@" not in text
    assert out["env"]["GITHUB_TOKEN"] == "[REDACTED:credential-name]"
    assert out["env"]["AWS_SECRET_ACCESS_KEY"] == "[REDACTED:credential-name]"
    assert out["env"]["HOME"] == "/root"
    assert out["list"][1:3] == [1, None] and out["list"][3] == {"password": None}
    # under a credential key, every value is the credential, however deep
    assert out["token"] == {"nested": "[REDACTED:credential-name]"}
    assert {"github-token", "authorization", "url-password", "credential-name"} <= set(hits)


def test_long_strings_are_cut_without_leaking_a_token() -> None:
    for start in range(2000, 2060, 3):  # tokens before, across and after the cut
        value = "a" * start + " " + TOKEN + " " + "b" * 5000
        hits: list[str] = []
        out = redact_json({"text": value}, hits)["text"]
        assert "QQQQ" not in out, start
        assert out.endswith("more characters not recorded]") and "truncated" in hits
        assert len(out) < 2200


def test_a_loss_replays_a_call_before_its_answer_whatever_order_the_pump_kept() -> None:
    # After a flood the pump keeps the short lines that go by in a loss mark, direction by
    # direction as it handles them: the answer's line may be listed before its request's.
    # Replayed in the order of their numbers, the call is answered (it was "no answer").
    rec, got = _recorder()
    scribe = Transcriber(rec)
    request = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"}}\n'
    answer = b'{"jsonrpc":"2.0","id":7,"result":{"content":[]}}\n'
    loss = Loss(1.0)
    loss.add(DIRECTIONS.index(C2S), 10, b"x" * (LINE_KEEP + 1))  # the flood's tail, dropped
    loss.add(DIRECTIONS.index(S2C), 12, answer, 1.2)  # handled first, numbered after
    loss.add(DIRECTIONS.index(C2S), 11, b"\n" + request, 1.1)
    replay_loss(scribe, 1.0, loss.packed(64 << 20))
    assert [(k, p.get("id")) for k, p in got] == [
        ("mcp-unrecorded", None),
        ("mcp-request", 7),
        ("mcp-response", 7),
    ]
