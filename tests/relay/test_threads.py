"""The relay in threads (relay.threaded: not Linux, or no fork): a reader that goes away is
passed on, and what waits for a recorder that fell behind is bounded, the loss recorded."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from typing import Any

from mcpshim.base import fdio
from mcpshim.relay.core import C2S, S2C, Recorder, relay_pipe
from mcpshim.relay.threaded import Relay
from tests.fixtures.runhelp import poll


def _between(relay: Relay, server: list[str]) -> tuple[int, int, subprocess.Popen[bytes]]:
    """Start `relay` between a client's pipes and `server`: the client's write end, its
    read end, and the server."""
    c_in_r, c_in_w = os.pipe()
    c_out_r, c_out_w = os.pipe()
    in_r, in_w = relay_pipe()
    out_r, out_w = relay_pipe()
    proc = subprocess.Popen(server, stdin=in_r, stdout=out_w)
    os.close(in_r)
    os.close(out_w)
    relay.start(c_in_r, in_w, out_r, c_out_w)
    return c_in_w, c_out_r, proc


def test_a_client_that_stops_reading_is_passed_on_to_the_server() -> None:
    # Drained instead, `yes` would run (and queue copies) for ever.
    relay = Relay(Recorder(lambda kind, payload: None, "s"))
    c_in_w, c_out_r, server = _between(relay, ["yes", '{"jsonrpc":"2.0","method":"n"}'])
    try:
        assert len(fdio.read_exactly(c_out_r, 1 << 20)) == 1 << 20
        os.close(c_out_r)
        assert server.wait(timeout=60) == -signal.SIGPIPE
    finally:
        server.kill()
    assert relay.server_done(60)
    assert relay.broken[S2C]
    os.close(c_in_w)
    relay.finish(60)


def _request(i: int, size: int) -> bytes:
    name = "t" * size
    body = f'{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"{name}"}}}}'
    return body.encode() + b"\n"


def test_copies_past_the_limit_are_dropped_and_the_loss_recorded() -> None:
    # The recorder is stuck in its first record while 16 MiB go through with a 1 MiB
    # limit: every byte crosses; the copies past the limit are dropped, and once the
    # recorder runs again the loss is recorded in its place, then recording goes on.
    got: list[tuple[str, dict[str, Any]]] = []
    stuck = threading.Event()

    def emit(kind: str, payload: dict[str, Any]) -> None:
        stuck.wait(60)
        got.append((kind, payload))

    limit = 1 << 20
    relay = Relay(Recorder(emit, "s"), limit=limit)
    c_in_w, c_out_r, cat = _between(relay, ["cat"])
    first = [_request(i, 64 << 10) for i in range(256)]
    stream = b"".join(first)
    writer = threading.Thread(target=fdio.write_all, args=(c_in_w, stream), daemon=True)
    writer.start()
    assert fdio.read_exactly(c_out_r, len(stream)) == stream
    writer.join(60)
    stuck.set()
    poll(lambda: relay.held == 0, "the recorder to catch up")
    late = [_request(1000 + i, 10) for i in range(3)]
    for msg in late:
        fdio.write_all(c_in_w, msg)
        assert fdio.read_exactly(c_out_r, len(msg)) == msg
    os.close(c_in_w)
    assert fdio.read_some(c_out_r, 10) == b""
    assert cat.wait(timeout=60) == 0
    assert relay.server_done(60)
    relay.finish(60)
    for direction in (C2S, S2C):
        mine = [(k, p) for k, p in got if p["direction"] == direction]
        ids = [p["id"] for k, p in mine if k == "mcp-request"]
        kept = [i for i in ids if i < 1000]
        assert kept == list(range(len(kept))) and len(kept) < 256 // 2
        assert ids[len(kept) :] == [1000, 1001, 1002]
        [(kind, lost)] = [(k, p) for k, p in mine if k == "mcp-unrecorded"]
        assert mine.index((kind, lost)) == len(kept)  # where it happened
        assert len(kept) + lost["messages"] == 256
        assert 0 < lost["bytes"] <= len(stream) - sum(map(len, first[: len(kept)]))
        assert "reached 1 MiB" in lost["reason"] and "relayed unchanged" in lost["reason"]
