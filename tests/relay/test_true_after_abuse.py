"""True statements after abuse (issue 41 item 3): after a 200 MB flood, or an answer that
is not UTF-8, review says each answered call was answered, and MCS505's count, its message
and its evidence say one number. The real `mcpshim run --mcp`, a raw client and a server
written by hand (tests/fixtures/hostile_server.py)."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

from tests.fixtures.approvescenario import MCPSHIM
from tests.fixtures.home import Home, install
from tests.fixtures.rawclient import HOSTILE, RawClient, new_session
from tests.fixtures.runhelp import events, poll


def _review(home: Home, sid: str) -> dict[str, Any]:
    done = subprocess.run(
        [*MCPSHIM, "review", "--dir", str(home.loc.shim_dir), "--session", sid, "--format",
         "json"],
        env=home.env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # MCS505 is a finding
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_calls_answered_after_a_flood_or_bad_bytes_are_answered(home: Home) -> None:
    install(home, ["git"])
    before = {e["session"] for e in events(home, "session-start")}
    client = RawClient(home, server=HOSTILE)
    hows = {3: "a", 4: "flood", 5: "b", 6: "latin1", 7: "c"}
    try:
        client.start()
        for msg_id, how in hows.items():
            client.send({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                         "params": {"name": "abuse", "arguments": {"how": how}}})  # fmt: skip
            if how == "flood":
                assert len(client.line()) == 200 << 20  # relayed whole
            line = client.line()
            assert line.startswith(b'{"jsonrpc": "2.0", "id": %d,' % msg_id), line[:80]
    finally:
        assert client.close() == 0
    sid = new_session(home, before)
    poll(lambda: len(events(home, "mcp-response", sid)) == len(hows), "every answer")
    doc = _review(home, sid)
    answered = {c["id"]: c["is_error"] for c in doc["calls"]}
    assert answered == dict.fromkeys(hows, False)  # before: 4 and 6 "no answer" (null)
    [lossy] = [e for e in events(home, "mcp-response", sid) if e.get("lossy")]
    assert lossy["id"] == 6 and lossy["lossy"] == "not-utf8"
    [finding] = [f for f in doc["findings"] if f["rule"] == "MCS505"]
    # the flood (one message: the answer after it is recorded) and the bad bytes (one)
    said = int(re.match(r"(\d+) message", finding["message"]).group(1))  # type: ignore[union-attr]
    per_record = [ev["messages"] for ev in finding["evidence"]]
    assert said == finding["count"] == sum(per_record) == 2, finding
    assert sorted(ev.get("unreadable", "lost") for ev in finding["evidence"]) == [
        "lost",
        "not-utf8",
    ]
