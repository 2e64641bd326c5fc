"""Memory follows the message (issue 41 item 2): a large answer is read by its skeleton
(relay.skeleton) and a listing recorded in parts (relay.listings), so the recorder holds
the line and one part, not a tree of the whole message. The values are json.loads's."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest

from mcpshim.log.execlog import EventRecord
from mcpshim.relay.core import C2S, S2C, Recorder
from mcpshim.relay.listings import PART_CHARS, list_payloads
from mcpshim.relay.skeleton import STREAM_MIN, skeleton
from mcpshim.review.boundary import SessionEvidence

TOOL = {"name": "t", "description": "Do t.", "inputSchema": {"type": "object"}}


def _whole(line: bytes) -> Any:
    """The skeleton's doc with its lists filled back in from its items."""
    sk = skeleton(line)
    assert sk is not None
    doc = json.loads(json.dumps(sk.doc))
    for key in sk.lists:
        doc["result"][key] = [item for item, _n in sk.items(key)]
    return doc


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a"},{"name":"b"}]}}',
        b'{"result":{"nextCursor":"c","tools":[ ] ,"x":[1,[2]]},"id":"s","jsonrpc":"2.0"}',
        b' {"id":1,"result":{"tools":[{"n":NaN}],"tools":[{"name":"second"}]}}\n',
        b'{"id":1,"result":{"tools":[1,2]},"result":{"content":"no list"}}',
        b'{"id":1,"result":{"tools":[1]}, "result": {"tools": [3, 4]}}',
        b'{"id":1,"error":{"code":-1,"message":"m"}}',
        b'{"id":1,"result":{"tools":"not a list"}}',
        '{"id":1,"result":{"tools":[{"name":"caf\\u00e9 \\ud83d\\ude00 é"}]}}'.encode(),
    ],
)
def test_a_skeleton_holds_what_json_reads(line: bytes) -> None:
    assert _whole(line) == json.loads(json.dumps(json.loads(line)))


@pytest.mark.parametrize(
    "line",
    [
        b'[{"id":1,"result":{}}]',  # a batch
        b'{"id":1,"result":{"tools":["\xff"]}}',  # not UTF-8
        b'{"id":1,"result":{"tools":[1,2]}} x',  # more after the object
        b'{"id":1,"result":{"tools":[1,2}}',  # a syntax error
        b'{"id":1,"result":{"tools":[' + b"[" * 100000 + b"]" * 100000 + b"]}}",  # too deep
        b'{"id":1,"result":{"tools":[1 2]}}',
    ],
)
def test_what_is_not_one_plain_object_is_left_to_the_whole_parse(line: bytes) -> None:
    assert skeleton(line) is None


def _listing(n: int, msg_id: int = 2) -> bytes:
    tools = [{"name": f"t{i}", "description": f"Tool {i}.", "inputSchema": {"type": "object"}}
             for i in range(n)]  # fmt: skip
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": {"tools": tools}}).encode()


def test_a_large_listing_is_recorded_in_parts_that_boundary_joins() -> None:
    got: list[tuple[str, dict[str, Any]]] = []
    rec = Recorder(lambda k, p: got.append((k, p)), "s")
    rec.message(C2S, 1.0, b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
    line = _listing(20000)
    assert len(line) > STREAM_MIN
    rec.message(S2C, 2.0, line)
    parts = [p for k, p in got if k == "mcp-tools"]
    assert len(parts) > 1 and [p.get("part", 0) for p in parts] == list(range(len(parts)))
    assert all(p["sha256"] == parts[0]["sha256"] and p["size"] == len(line) for p in parts)
    names = [t["name"] for p in parts for t in p["tools"]]
    assert names == [f"t{i}" for i in range(20000)]
    ev = SessionEvidence("s")
    for i, (kind, payload) in enumerate(got):
        ev.feed(EventRecord(kind, payload, f"exec.log@{i}"))
    assert len(ev.listings) == 1 and len(ev.tools) == 20000
    # a small listing parsed whole gives the same rows, in one record
    whole = [t for p in list_payloads("tools/list", json.loads(_listing(3))["result"], None)
             for t in p["tools"]]  # fmt: skip
    assert whole == [t for p in parts for t in p["tools"]][:3]
    assert max(len(json.dumps(p)) for p in parts) < 4 * PART_CHARS


def test_the_recorder_holds_a_listing_in_a_few_times_its_size() -> None:
    # A tools/list of 100,000 tools (7.5 MB) took 317 MiB in one process (42x): parsed
    # whole, then recorded in one record. Read by its skeleton and recorded in parts, what
    # the recorder allocates stays under a few times the line (30,000 tools here: the
    # ratio is the same, tracemalloc is slow).
    rec = Recorder(lambda k, p: None, "s")
    rec.message(C2S, 1.0, b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
    line = _listing(30000)
    tracemalloc.start()
    try:
        rec.message(S2C, 2.0, line)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(line), (peak, len(line))
