"""A client's line is framed as the server reads it (issue 39 item 1). The Python SDK's
stdio server reads its stdin with universal newlines, so a bare `\\r` ends a line there:
one approved call holding another as a member value between two bare `\\r` passed the gate
as the approved call while the server ran the other. Under `--enforce` such a line is
refused (an error for each id it carries, the refusal recorded); without it, each message
is recorded as the server read it, so the hidden call's execs are filed under it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from mcpshim.relay.core import C2S
from mcpshim.relay.framer import Framer, Oversize, Split
from mcpshim.relay.gate import REFUSED_CODE
from tests.fixtures.home import Home, install
from tests.fixtures.rawclient import RawClient
from tests.fixtures.rawclient import new_session as _session
from tests.fixtures.runhelp import events, poll
from tests.relay.test_gate_fail_closed import (
    EVIL,
    _approved,
    _cli,
    _findings,
    _gits,
)

HIDDEN = (
    b'{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"lookup",'
    b'"arguments":{"what":"hidden"}}}'
)
#: an approved call (`note`) holding a call to the drifted `lookup` between two bare \r
PAYLOAD = (
    b'{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"note",'
    b'"arguments":{"text":"n"}},"x":\r' + HIDDEN + b"\r}\n"
)
NOTE = {"jsonrpc": "2.0", "id": 22, "method": "tools/call",
        "params": {"name": "note", "arguments": {"text": "after"}}}  # fmt: skip


def _answers(client: RawClient, *wanted: int) -> dict[Any, dict[str, Any]]:
    """Every answer until those with the `wanted` ids have come, by id."""
    got: dict[Any, dict[str, Any]] = {}
    while not set(wanted) <= set(got):
        line = client.line()
        assert line, f"the stream ended; answers so far: {got}"
        doc = json.loads(line)
        for item in doc if isinstance(doc, list) else [doc]:  # the gate answers ids at once
            if "id" in item:
                got[item["id"]] = item
    return got


def test_a_call_hidden_between_bare_carriage_returns_is_refused(home: Home, tmp_path: Path) -> None:
    lock = _approved(home, tmp_path)
    before = {e["session"] for e in events(home, "session-start")}
    # `lookup` drifted: a call to it alone would be refused
    client = RawClient(home, "--lock", str(lock), "--enforce", env={"FIXTURE_DESCRIPTION": EVIL})
    try:
        client.start()
        client.send(PAYLOAD)
        client.send(NOTE)  # the session goes on: a readable, approved call is passed on
        got = _answers(client, 22)
    finally:
        client.close()
    assert got[22]["result"]["content"][0]["text"] == "after"
    for msg_id in (20, 21):
        err = got[msg_id]["error"]
        assert err["code"] == REFUSED_CODE and "bare carriage return" in err["message"], err
    sid = _session(home, before)
    poll(lambda: events(home, "session-end", sid), "the end")
    assert _gits(home, sid) == []  # the hidden call never reached the server
    refused = [e for e in events(home, "mcp-refused", sid) if e.get("unreadable")]
    assert sorted(e["id"] for e in refused) == [20, 21]
    assert {e["unreadable"] for e in refused} == {"line-ends"}
    assert {e["sha256"] for e in refused} == {hashlib.sha256(PAYLOAD).hexdigest()}
    # the copy is what the client sent, framed as the SDK's server would have read it: the
    # hidden call is on record, answered by the gate's error
    text = _cli(home, "review", "--session", sid).stdout
    assert "tools/call lookup (id 21)\n   answered: error\n   ran: nothing" in text, text


def test_a_cut_line_with_no_id_to_answer_ends_the_session(home: Home, tmp_path: Path) -> None:
    lock = _approved(home, tmp_path)
    before = {e["session"] for e in events(home, "session-start")}
    client = RawClient(home, "--lock", str(lock), "--enforce")
    client.start()
    client.send(b'{"jsonrpc":"2.0","method":"notifications/a"}\r'
                b'{"jsonrpc":"2.0","method":"notifications/b"}\n')  # fmt: skip
    assert client.line() == b""  # the client's stream ends
    assert client.close() is not None
    sid = _session(home, before)
    poll(lambda: events(home, "session-end", sid), "the end")
    [ended] = [e for e in events(home, "mcp-refused", sid) if e.get("ended")]
    assert ended["unreadable"] == "line-ends" and ended["id"] is None


def test_without_enforce_the_hidden_call_is_recorded_as_the_server_read_it(home: Home) -> None:
    install(home, ["git"])
    before = {e["session"] for e in events(home, "session-start")}
    client = RawClient(home)
    try:
        client.start()
        client.send(PAYLOAD)
        client.send(NOTE)
        got = _answers(client, 21, 22)
    finally:
        client.close()
    # the server ran the hidden call (and could not parse the pieces around it)
    assert got[21]["result"]["content"][0]["text"].startswith("hidden: git version")
    sid = _session(home, before)
    poll(lambda: events(home, "session-end", sid), "the end")
    requests = {e["id"]: e for e in events(home, "mcp-request", sid)}
    assert requests[21]["tool"] == "lookup" and requests[21]["arguments"] == {"what": "hidden"}
    assert 20 not in requests  # the server never read a call with id 20
    unparsed = events(home, "mcp-unparsed", sid)
    [split] = [u for u in unparsed if u.get("unreadable") == "line-ends"]
    # the same bytes (its newline included) the gate's refusal names
    assert split["sha256"] == hashlib.sha256(PAYLOAD).hexdigest()
    assert split["size"] == len(PAYLOAD) and split["direction"] == C2S
    # git is filed under the call that ran it, with its own arguments
    doc = json.loads(_cli(home, "review", "--session", sid, "--format", "json").stdout)
    [lookup] = [c for c in doc["calls"] if c["id"] == 21]
    assert lookup["name"] == "lookup" and "git" in json.dumps(lookup)
    [finding] = [f for f in _findings(home, sid) if f["rule"] == "MCS505"]
    assert "bare carriage return" in json.dumps(finding)


def _framed(chunks: list[bytes]) -> list[bytes | Oversize | Split]:
    framer = Framer(universal=True)
    out: list[bytes | Oversize | Split] = []
    for chunk in chunks:
        out += framer.feed(chunk)
    if (split := framer.split_at_end()) is not None:
        out.append(split)
    return out


def test_the_clients_lines_end_where_universal_newlines_end_them() -> None:
    whole = b"a\r\nb\rc\nd\n"
    # every cut of the stream frames alike; a \r\n cut in two is one end
    for cut in range(len(whole) + 1):
        got = _framed([whole[:cut], whole[cut:]])
        lines = [x for x in got if isinstance(x, bytes)]
        assert lines == [b"a", b"b", b"c", b"d"], (cut, got)
        [split] = [x for x in got if isinstance(x, Split)]
        assert (split.size, split.pieces) == (4, 2)  # "b\rc\n" read as two lines
        assert split.sha256 == hashlib.sha256(b"b\rc\n").hexdigest()
    # blank pieces around one message: no split
    assert _framed([b"\r{}\r\r\n"]) == [b"", b"{}", b""]
    # the server's direction: \n only
    plain = Framer()
    assert list(plain.feed(b"a\rb\r\nc\n")) == [b"a\rb\r", b"c"]
