"""`mcpshim run --mcp`: the supervisor with the MCP relay between the client and the server.

The server gets two pipes as stdin and stdout (posix_spawn file actions); the relay joins
them to the supervisor's own stdin and stdout, i.e. the client's: on Linux from a forked
pump process that the family never sees (relaychild), elsewhere from threads here.
Everything else is the supervisor's session: the session id, shims first on PATH,
sampling, survivors. The session announces itself (`mcp-session`) before the server
starts, so review and tree know to attribute its processes to tool calls, and every
recorded response carries the family's live processes (`descendants` of the supervisor,
orphans it adopted included).
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

import psutil

from mcpshim import relaychild
from mcpshim.mcprelay import Recorder, Relay, announce, relay_pipe
from mcpshim.procinfo import LINUX, read_stat, start_ticks
from mcpshim.relaychild import ForkedRelay

if TYPE_CHECKING:
    from mcpshim.supervisor import Supervisor

__all__ = ["descendants", "run_relayed"]

_DRAIN_S = 2.0  # after the server exits: how long its stdout may still be read


def descendants(root: int, exclude: frozenset[int] = frozenset()) -> list[tuple[int, int | None]]:
    """(pid, start ticks) of every live descendant of `root` now, zombies left out."""
    if not LINUX:
        try:
            kids = psutil.Process(root).children(recursive=True)
        except psutil.Error:
            return []
        return [(k.pid, start_ticks(k.pid)) for k in kids if k.pid not in exclude]
    children: dict[int, list[int]] = {}
    starts: dict[int, int | None] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = read_stat(int(name))
        if st is None or st.state == "Z":
            continue
        children.setdefault(st.ppid, []).append(st.pid)
        starts[st.pid] = st.start
    out: list[tuple[int, int | None]] = []
    todo = [root]
    while todo:
        for kid in children.get(todo.pop(), ()):
            if kid not in exclude:
                out.append((kid, starts[kid]))
            todo.append(kid)
    return sorted(out)


def run_relayed(sup: Supervisor) -> int:
    """Run the supervisor's session with the relay on the command's stdin and stdout."""
    me = os.getpid()
    in_r, in_w = relay_pipe()
    out_r, out_w = relay_pipe()
    announce(sup.emit, sup.session)
    recorder = Recorder(
        sup.emit, sup.session, probe=lambda: descendants(me, frozenset(sup.helpers))
    )
    # Linux: the pumps run in a child of their own, out of reach of this process's
    # interpreter lock (relaychild); elsewhere they are threads here.
    relay: Relay = Relay(recorder)
    if relaychild.available():
        forked = ForkedRelay(recorder)
        with contextlib.suppress(OSError):  # fork failed (EAGAIN, ENOMEM): threads
            forked.start(0, in_w, out_r, 1)
            sup.add_helper(forked.pid)
            relay = forked
    if not isinstance(relay, ForkedRelay):
        relay.start(0, in_w, out_r, 1)
    actions = [(os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_DUP2, out_w, 1)]
    closed = False

    def close_server_ends() -> None:
        # The server's ends only: held here, they would keep the server's stdin from
        # ever reporting a gone reader (the relay could not drain the client) and its
        # stdout from reaching EOF while the server runs.
        nonlocal closed
        if not closed:
            closed = True
            for fd in (in_r, out_w):
                with contextlib.suppress(OSError):
                    os.close(fd)

    sup.on_spawn(close_server_ends)
    try:
        return sup.run(actions)
    finally:
        close_server_ends()
        # Pass on what the server wrote last (a descendant that kept its stdout open
        # cannot hold us past the drain time), then record everything relayed.
        relay.server_done(_DRAIN_S)
        relay.finish()
        if isinstance(relay, ForkedRelay) and sup.helpers.get(relay.pid) is None:
            relay.reap()  # the session's loop did not reap it: it ended after the loop
