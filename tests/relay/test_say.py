"""A line of mcpshim's own to the client (issue 39 item 5: the departure notification) lands
between two of the server's lines, never inside one: at once where the server's output ends
a line, after the line it is in the middle of, or at its end behind a newline that closes
what was cut short. Through the pump child and through the threads, on real pipes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from mcpshim.base import fdio
from mcpshim.relay.child import available
from mcpshim.relay.core import Recorder, Relaying, log_notification, relay_pipe
from mcpshim.relay.forked import ForkedRelay
from mcpshim.relay.threaded import Relay

NOTE = log_notification("mcpshim: departure")


def _relays() -> Iterator[str]:
    yield "threads"
    if available():
        yield "pump child"


def _read_exactly(fd: int, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = os.read(fd, n - len(got))
        assert chunk, f"the stream ended after {got!r}"
        got += chunk
    return got


@pytest.mark.parametrize("kind", list(_relays()))
def test_a_said_line_waits_for_the_servers_line_to_end(kind: str) -> None:
    def emit(k: str, payload: dict[str, Any]) -> None:
        pass

    recorder = Recorder(emit, "s")
    relay: Relaying = ForkedRelay(recorder, lines=True) if kind == "pump child" else Relay(recorder)
    c_in_r, c_in_w = os.pipe()
    c_out_r, c_out_w = os.pipe()
    in_r, in_w = relay_pipe()
    out_r, out_w = relay_pipe()
    relay.start(c_in_r, in_w, out_r, c_out_w)  # the relay's ends are the relay's now
    try:
        relay.say(NOTE)  # the server has said nothing: at a line's end
        assert _read_exactly(c_out_r, len(NOTE)) == NOTE
        fdio.write_all(out_w, b'{"a":')  # the server is in the middle of a line
        assert _read_exactly(c_out_r, 5) == b'{"a":'
        relay.say(NOTE)
        fdio.write_all(out_w, b"1}\n")
        assert _read_exactly(c_out_r, 3 + len(NOTE)) == b"1}\n" + NOTE  # after the line
        fdio.write_all(out_w, b'{"b":')
        assert _read_exactly(c_out_r, 5) == b'{"b":'
        relay.say(NOTE)
        os.close(out_w)  # the server ends mid-line: a newline closes it, then the note
        out_w = -1
        assert _read_exactly(c_out_r, 1 + len(NOTE)) == b"\n" + NOTE
        assert os.read(c_out_r, 1) == b""  # then the client's stream ends
    finally:
        os.close(c_in_w)
        if out_w >= 0:
            os.close(out_w)
        relay.server_done(10)
        relay.finish(10)
        if isinstance(relay, ForkedRelay):
            relay.reap()
        for fd in (c_out_r, in_r):
            os.close(fd)
