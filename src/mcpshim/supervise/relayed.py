"""`mcpshim run --mcp`: the supervisor with the MCP relay between the client and the server.

The server gets two pipes as stdin and stdout (posix_spawn file actions); the relay joins
them to the supervisor's own stdin and stdout, i.e. the client's: on Linux from a pump
child and a recorder child that the family never sees (relay.forked), elsewhere from
threads here.
Everything else is the supervisor's session: the session id, shims first on PATH,
sampling, survivors. The session announces itself (`mcp-session`) before the server
starts, so review and tree know to attribute its processes to tool calls, and every
recorded response carries the family's live processes (`FamilyProbe`: descendants of
the supervisor, orphans it adopted included).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from mcpshim.proc.procinfo import LINUX, Stat, read_stat, start_ticks
from mcpshim.relay import child as relaychild
from mcpshim.relay.core import Recorder, Relaying, log_notification
from mcpshim.relay.forked import ForkedRelay

if TYPE_CHECKING:
    from mcpshim.relay.gate import Gate
    from mcpshim.supervise.supervisor import Supervisor

__all__ = ["FamilyProbe", "run_relayed"]

_DRAIN_S = 2.0  # after the server exits: how long its stdout may still be read


class FamilyProbe:
    """The live descendants of `root` as (pid, start ticks), zombies left out: the evidence
    each recorded response carries.

    It runs once per response, so it reads `stat` only for pids not yet proven outsiders: a
    process whose ancestry reaches the top of the tree without meeting `root` can never join
    the family (an orphan is re-parented up its own ancestry), so on a desktop with hundreds
    of processes a probe costs a /proc listing and a handful of reads instead of one read
    (about 11 us) per process. A pid whose parent vanished mid-probe stays undecided. A pid
    leaves the outsider set when it leaves /proc; its reuse between two probes would need
    the pid counter to wrap.
    """

    def __init__(self, root: int, exclude: Callable[[], Collection[int]] = frozenset) -> None:
        self.root = root
        self._exclude = exclude
        self.outsiders: set[int] = set()

    def __call__(self) -> list[tuple[int, int | None]]:
        skip = set(self._exclude())
        if not LINUX:
            import psutil

            try:
                kids = psutil.Process(self.root).children(recursive=True)
            except psutil.Error:
                return []
            return sorted((k.pid, start_ticks(k.pid)) for k in kids if k.pid not in skip)
        present = {int(n) for n in os.listdir("/proc") if n.isdigit()}
        self.outsiders &= present
        stats = {p: st for p in present - self.outsiders if (st := read_stat(p)) is not None}
        children: dict[int, list[int]] = {}
        for st in stats.values():
            children.setdefault(st.ppid, []).append(st.pid)
        family: set[int] = set()
        out: list[tuple[int, int | None]] = []
        todo = [self.root]
        while todo:
            for kid in children.get(todo.pop(), ()):
                family.add(kid)
                st = stats[kid]
                if kid not in skip and st.state != "Z":
                    out.append((kid, st.start))
                todo.append(kid)
        self._prove_outside(stats, family)
        return sorted(out)

    def _prove_outside(self, stats: dict[int, Stat], family: set[int]) -> None:
        known: dict[int, bool] = {}
        for pid in stats:
            chain: list[int] = []
            p = pid
            while True:
                if p in known:
                    outside = known[p]
                    break
                if p == self.root or p in family:
                    outside = False
                    break
                if p == 0 or p in self.outsiders:
                    outside = True
                    break
                st = stats.get(p)
                if st is None:
                    outside = False  # the parent went away while we looked: undecided
                    break
                chain.append(p)
                p = st.ppid
            for c in chain:
                known[c] = outside
        self.outsiders.update(p for p, outside in known.items() if outside)


def run_relayed(sup: Supervisor, gate: Gate | None = None) -> int:
    """Run the supervisor's session with the relay on the command's stdin and stdout;
    with a `gate` (--enforce), the relay that decides each request first (relay.gate).

    The pipes and the session's announcement come first (the launch: `Supervisor.watch`),
    the relay's children once the command runs (a launch from `mcpshim run` has it running
    already; what it writes waits in the pipe)."""
    me = os.getpid()
    sup.watch()  # first: the relay's children and threads come after
    pipes = sup.launch.relay_pipes()
    _in_r, in_w, out_r, _out_w = pipes
    forked: ForkedRelay | None = None
    relay: Relaying | None = None

    def mcpshims_own() -> set[int]:
        return {*sup.helpers, *(forked.helpers if forked else ())}

    recorder = Recorder(sup.emit, sup.session, probe=FamilyProbe(me, mcpshims_own))

    def start_relay() -> None:
        # Linux: the pumps and the recorder run in children of their own, out of reach of
        # this process's interpreter lock (relay.forked); elsewhere they are threads here.
        nonlocal forked, relay
        if gate is not None:
            from mcpshim.relay.gate import GatedRelay

            relay = GatedRelay(recorder, gate)
        elif sup.launch.pumps is not None:  # started with the server (supervise.launch)
            # (never with a departure watch: a prelaunch leaves --on-departure to click)
            forked = ForkedRelay(recorder)
            forked.adopt(sup.launch.pumps)
            forked.start_recorder()
            for pid in forked.helpers:
                sup.add_helper(pid)
            relay = forked
        elif relaychild.available():
            # with a departure watch the pump reads the server's lines, so it can say one
            # between them
            forked = ForkedRelay(recorder, lines=sup.say is not None)
            try:
                forked.start(0, in_w, out_r, 1)
            except OSError:  # fork failed (EAGAIN, ENOMEM): threads
                forked = None
            else:
                for pid in forked.helpers:
                    sup.add_helper(pid)
                relay = forked
        if relay is None:
            from mcpshim.relay.threaded import Relay

            relay = Relay(recorder)
        if not isinstance(relay, ForkedRelay):
            relay.start(0, in_w, out_r, 1)
        if sup.say is not None:  # (--on-departure terminate asked for it: departwatch)
            told = relay

            def say(text: str) -> None:
                told.say(log_notification(text))

            sup.say = say

    sup.on_spawn(start_relay)
    try:
        return sup.run()
    finally:
        sup.launch.close_server_ends()
        if relay is not None:
            # Pass on what the server wrote last (a descendant that kept its stdout open
            # cannot hold us past the drain time), then record everything relayed.
            relay.server_done(_DRAIN_S)
            relay.finish()
            if isinstance(relay, ForkedRelay) and sup.helpers.get(relay.pid) is None:
                relay.reap()  # the session's loop did not reap it: it ended after the loop
