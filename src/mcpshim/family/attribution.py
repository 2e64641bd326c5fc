"""Which MCP tool call each fact of a session belongs to: the link between the relay's records
and the log, by the moment each fact happened.

A call owns what happens during it. A process is filed under the call in flight when it
started (forked); a socket call under the call in flight when it was made, whatever process
made it, the server's own included. Start times come from /proc (clock ticks, 10 ms on
Linux), so a process's start is an interval, not an instant; on Linux the relay also reads
the kernel's pid counter as it passes each request and response on, so a fork is placed
exactly: inside a call when its pid is between the two marks. A socket call has the
tracer's own time (microseconds). When several calls were in flight and neither the clock
nor the pid marks tell them apart, the records' evidence may (family.evidence); otherwise
the fact is *ambiguous* among them and says so: nothing is guessed. With no call in flight
a fact is the server's own time between calls, said as such.

Ancestry is context, never the owner of later work: a shell one call started that runs a
program during a later call is that later call's work, done "in the shell call #3 started"
(`context`). A process started during a call and alive when it returned outlived it; what
kind of outliving that was (a helper the server keeps, a detached process, one alive at the
session's end) is `family.lifetimes`'.

`Collector` watches a record stream (review's, tree's) and keeps only what sessions relayed
by `mcpshim run --mcp` need (they announce themselves with an `mcp-session` event before any
of their processes run), so attribution adds no second pass over the log and no memory for
sessions without tool calls.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mcpshim.base import fdio
from mcpshim.errors import InputError
from mcpshim.family.calls import Call, parse_calls
from mcpshim.family.evidence import Candidates
from mcpshim.family.images import parse_time
from mcpshim.family.lifetimes import mark_outlived, sightings
from mcpshim.family.model import Assembler
from mcpshim.family.netfacts import NetFacts
from mcpshim.family.overlap import MayHaveRun, Overlap, Owner, may_have_run, overlaps
from mcpshim.family.tree import Forest, Image, Node, build_forest, relink_traced
from mcpshim.log import execlog
from mcpshim.log.execlog import CLK_TCK, EventRecord, Record
from mcpshim.log.indexscan import MCP_MARK
from mcpshim.log.rows import ExecRows, Row
from mcpshim.log.scope import scope
from mcpshim.paths import Locations

__all__ = [
    "Attribution",
    "Call",
    "Collector",
    "Owner",
    "anchors_for",
    "attribute",
    "attribute_log",
    "log_has_relayed_sessions",
    "scoped_collector",
]

TICK = 1.0 / CLK_TCK
_SLACK = 0.002  # clock anchoring jitter
_EVENTS = ("session-start", "session-end", "survivor", "reaped", "observed", "mcp-session")
Anchor = Callable[[str], float | None]


def anchors_for(loc: Locations) -> Anchor:
    """Boot time per boot id: the log's anchors, else this boot's own clock."""
    anchors = execlog.Anchors(loc.boot_dir)
    here = execlog.current_boot_id()

    def get(boot: str) -> float | None:
        got = anchors.get(boot)
        return got if got is not None or boot != here else execlog.now_anchor()

    return get


@dataclass
class Attribution:
    session: str
    start: Mapping[str, Any] | None
    end: Mapping[str, Any] | None
    calls: list[Call]
    forest: Forest
    server: Node | None
    owner: dict[int, Owner] = field(default_factory=dict)  # node id -> owner
    outlived: dict[int, tuple[str, str]] = field(default_factory=dict)  # node id -> evidence
    #: node id -> how it outlived its call: kept, detached, survived (family.lifetimes)
    outlived_kind: dict[int, tuple[str, str]] = field(default_factory=dict)
    unparsed: list[Mapping[str, Any]] = field(default_factory=list)
    start_of: dict[int, tuple[float, float] | None] = field(default_factory=dict)
    #: each listed tool's description, as the server last listed it (redacted)
    descriptions: dict[str, str] = field(default_factory=dict)
    #: node id -> why evidence filed it under its call, among others in flight
    reasons: dict[int, str] = field(default_factory=dict)
    #: node id (the top of what evidence filed) -> the calls it was filed among
    among: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: overlapping calls whose processes could not be told apart (family.overlap)
    overlaps: list[Overlap] = field(default_factory=list)
    #: the processes' socket calls, as the model keeps them (family.netfacts)
    net: NetFacts = field(default_factory=NetFacts)
    #: node id -> (the call, the process it started) a process runs in when that call is
    #: not its own: cp run during call #2 in the bash call #1 started
    context: dict[int, tuple[int, Node]] = field(default_factory=dict)
    _may: dict[int, list[MayHaveRun]] | None = None
    _windows: _Windows | None = field(default=None, repr=False, compare=False)
    _cands: Candidates | None = field(default=None, repr=False, compare=False)

    def may_have_run(self, call: int) -> list[MayHaveRun]:
        """What a call of an overlap group may have run (none for a call of no group)."""
        if self._may is None:
            self._may = may_have_run(self.overlaps, self.owner)
        return self._may.get(call, [])

    _tops: dict[Owner, list[Node]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def nodes(self) -> Iterator[Node]:
        for root in self.forest.roots:
            yield from (n for n in root.walk() if n.known)

    def processes(self, owner: Owner) -> list[Node]:
        """The top processes with this owner (their descendants hang below them); found in
        one walk for every owner (a text tree asks once per call)."""
        if self._tops is None:
            self._tops = {}
            for n in self.nodes():
                if n.id in self.owner:
                    own, p = self.owner[n.id], n.parent
                    if p is None or self.owner.get(p.id, -1) != own:
                        self._tops.setdefault(own, []).append(n)
        return list(self._tops.get(owner, ()))

    def calls_at(self, t: datetime) -> tuple[int, ...]:
        """The calls in flight at the instant `t` (request sent, response not yet back)."""
        if self._windows is None:
            return ()
        x = t.timestamp()
        return self._windows((x, x))

    def owner_at(self, node: Node | None, t: datetime, named: str = "") -> Owner:
        """The call a fact that happened at `t` in `node`'s process belongs to: the one in
        flight; among several, the one that started the process, else the one whose
        arguments alone hold `named` (a destination), else all of them; None: between
        calls."""
        hits = self.calls_at(t)
        if len(hits) <= 1:
            return hits[0] if hits else None
        own = self.owner.get(node.id) if node is not None else None
        if isinstance(own, int) and own in hits:
            return own
        if named and self._cands is not None:
            holders = [i for i in hits if self._cands.holds(i, named)]
            if len(holders) == 1:
                return holders[0]
        return hits

    def holds(self, call: int, value: str) -> bool:
        """Whether the call's arguments hold `value` (a destination, named by a URL)."""
        return self._cands is not None and self._cands.holds(call, value)

    def owner_of(self, boot: str, pid: int, start: int | None) -> Owner:
        for n in self.nodes():
            if (n.boot_id, n.pid, n.start) == (boot, pid, start):
                return self.owner.get(n.id)
        return None


# ---- collecting --------------------------------------------------------------------------


@dataclass
class _Session:
    images: list[Image] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)


class Collector:
    """Keeps, from one pass over the log, what attribution needs for relayed sessions."""

    def __init__(self, session: str | None = None) -> None:
        self.only = session
        self.sessions: dict[str, _Session] = {}
        # its images: the process model's (family.model); network facts of relayed sessions
        self.model = Assembler(session, keep_net=self.sessions.__contains__)

    def feed(self, rec: Record) -> None:
        if isinstance(rec, EventRecord):
            sid = rec.data.get("session")
            if isinstance(sid, str) and (self.only is None or sid == self.only):
                if rec.kind == "mcp-session":
                    self.sessions.setdefault(sid, _Session())
                s = self.sessions.get(sid)
                if s is not None and (rec.kind.startswith("mcp-") or rec.kind in _EVENTS):
                    s.events.append(rec)
        self._keep(self.model.feed(rec))

    def _keep(self, imgs: Iterable[Image]) -> None:
        for img in imgs:
            s = self.sessions.get(img.session)
            if s is not None:
                s.images.append(img)

    def tee(self, records: Iterable[Record]) -> Iterator[Record]:
        for rec in records:
            self.feed(rec)
            yield rec

    def tee_rows(self, items: Iterable[Row | Record], rows: ExecRows) -> Iterator[Row | Record]:
        """`tee` over log.rows' items (a row made its record here): one session's read
        (log.scope) feeds its review or tree and its attribution in one pass."""
        for item in items:
            self.feed(rows.record(item) if isinstance(item, tuple) else item)
            yield item

    def results(self, anchor: Anchor, final: bool = True) -> list[Attribution]:
        """Each session attributed; `final`: nothing more will be read (what the model
        still held goes in), False for a live view that reads on."""
        if final:
            self._keep(self.model.finish())
        model = self.model
        out = [_attribute(sid, s, anchor, model.exits, model.forked_by)
               for sid, s in self.sessions.items()]  # fmt: skip
        for att in out:
            att.net = self.model.net
        return out


def attribute(records: Iterable[Record], session: str, anchor: Anchor) -> Attribution | None:
    c = Collector(session)
    for rec in records:
        c.feed(rec)
    return next(iter(c.results(anchor)), None)


def log_has_relayed_sessions(loc: Locations) -> bool:
    """A byte scan (no decoding) for a session run with --mcp, so logs without one cost
    review and tree nothing more than this."""
    tail = b""
    for seg in execlog.segments(loc):
        try:
            with fdio.open_regular(seg) as fh:  # a FIFO would block the read
                while chunk := fh.read(1 << 22):
                    if MCP_MARK in tail + chunk[: len(MCP_MARK)] or MCP_MARK in chunk:
                        return True
                    tail = chunk[-len(MCP_MARK) :]
        except (OSError, InputError):
            continue
    return False


def scoped_collector(loc: Locations, session: str | None) -> Collector | None:
    """A collector to tee one session's read through (`Collector.tee_rows`) when that read
    is its part of the log (log.scope) and the log holds a session run with --mcp; None:
    `attribute_log` reads (or skips) the log itself."""
    sc = scope(loc, session) if loc.log_dir.is_dir() else None
    return Collector(session) if sc is not None and sc.mcp else None


def attribute_log(loc: Locations, session: str | None = None) -> list[Attribution]:
    """Every relayed session in the log (or just `session`: its part, log.scope),
    attributed; [] without any."""
    if not loc.log_dir.is_dir():
        return []
    sc = scope(loc, session)
    if not (sc.mcp if sc is not None else log_has_relayed_sessions(loc)):
        return []
    collector = Collector(session)
    for rec in execlog.iter_records(loc, []) if sc is None else sc.records([]):
        collector.feed(rec)
    return collector.results(anchors_for(loc))


# ---- attributing -------------------------------------------------------------------------


def _start_interval(node: Node, anchor: Anchor) -> tuple[float, float] | None:
    """When the process may have started (UTC seconds): one clock tick wide."""
    if node.start is not None:
        base = anchor(node.boot_id)
        if base is not None:
            lo = base + node.start / CLK_TCK
            return (lo - _SLACK, lo + TICK + _SLACK)
    t = node.first_time
    if t is None:
        return None
    return (t.timestamp() - TICK - _SLACK, t.timestamp() + TICK + _SLACK)


def _window(call: Call, end: float) -> tuple[float, float]:
    return (call.request.timestamp(), call.response.timestamp() if call.response else end)


def _find_server(forest: Forest, start: Mapping[str, Any] | None) -> Node | None:
    if start is None:
        return None
    pid, pstart = start.get("child_pid"), start.get("child_start")
    fallback = None
    for root in forest.roots:
        for n in root.walk():
            if n.pid == pid:
                if n.known and n.start == pstart:
                    return n
                if not n.known:
                    fallback = n
    return fallback


class _Windows:
    """The calls whose window meets an interval, in call order, without a pass over every
    call (a session of thousands of calls and processes would be quadratic): a window that
    meets [lo, hi] starts within the longest finite window's length before lo; the windows
    still open (no response) are few and always checked."""

    def __init__(self, windows: list[tuple[float, float]]) -> None:
        self.windows = windows
        finite = [(w[0], i) for i, w in enumerate(windows) if w[1] != math.inf]
        self.starts = sorted(finite)
        self.keys = [t for t, _ in self.starts]
        self.longest = max((windows[i][1] - t for t, i in finite), default=0.0)
        self.open = [i for i, w in enumerate(windows) if w[1] == math.inf]

    def __call__(self, iv: tuple[float, float]) -> tuple[int, ...]:
        lo = bisect.bisect_left(self.keys, iv[0] - self.longest)
        hi = bisect.bisect_right(self.keys, iv[1])
        cands = [i for _, i in self.starts[lo:hi]] + self.open
        w = self.windows
        return tuple(sorted(i for i in cands if iv[0] <= w[i][1] and w[i][0] <= iv[1]))


def _attribute(
    session: str,
    s: _Session,
    anchor: Anchor,
    exits: Mapping[tuple[str, int, int | None], datetime] | None = None,
    forked_by: Mapping[tuple[str, int, int | None], tuple[int, int | None]] | None = None,
) -> Attribution:
    start = next((e.data for e in s.events if e.kind == "session-start"), None)
    end = next((e.data for e in s.events if e.kind == "session-end"), None)
    calls, unparsed = parse_calls(s.events)
    forest = relink_traced(build_forest(s.images), forked_by or {})
    att = Attribution(session, start, end, calls, forest, _find_server(forest, start))
    att.unparsed = unparsed
    for ev in s.events:
        if ev.kind == "mcp-tools":
            for t in ev.data.get("tools", ()):
                d = t.get("definition") if isinstance(t, dict) else None
                if isinstance(d, dict) and isinstance(t.get("name"), str):
                    att.descriptions[t["name"]] = str(d.get("description") or "")
    end_t = parse_time(end.get("time")) if end else None
    # pid marks are the session's boot's (the relay's, the server's): a process of the
    # same session on another boot cannot be, but never compare across boots
    here = str(start.get("boot_id") or "") if start else ""
    horizon = end_t.timestamp() if end_t else math.inf
    windows = [_window(c, horizon) for c in calls]
    overlapping = _Windows(windows)

    def by_time(node: Node) -> Owner:
        iv = att.start_of[node.id]
        if iv is None:
            return None
        hits = overlapping(iv)
        if hits and node.boot_id == here:
            # Clock ticks are 10 ms; the pid counter orders forks exactly. Where every
            # candidate call has its marks, keep those the process was forked inside.
            inside = [calls[i].forked_inside(node.pid) for i in hits]
            if None not in inside:
                hits = tuple(i for i, yes in zip(hits, inside, strict=True) if yes)
        return hits[0] if len(hits) == 1 else hits or None

    for root in forest.roots:
        stack: list[tuple[Node, None, Owner]] = [(root, None, None)]
        while stack:
            node, _, inherited = stack.pop()
            mine: Owner = None
            if node.known and node is not att.server:
                iv = att.start_of[node.id] = _start_interval(node, anchor)
                # By its own start; a process with no known start has only its ancestry.
                mine = by_time(node) if iv is not None else inherited
                att.owner[node.id] = mine
            stack.extend((c, None, mine) for c in node.children)
    cwd = str(start.get("cwd") or "") if start else ""
    att._windows = overlapping
    att._cands = Candidates([c.arguments for c in calls], cwd)
    _by_evidence(att, att._cands)
    _contexts(att)
    att.overlaps = overlaps(att.nodes(), att.owner)
    mark_outlived(att, sightings(s.events), exits or {})
    return att


def _contexts(att: Attribution) -> None:
    """For each process whose call is not that of the call-started process above it, that
    call and process: the terminal a later call's cp ran in."""
    for root in att.forest.roots:
        stack: list[tuple[Node, tuple[int, Node] | None]] = [(root, None)]
        while stack:
            node, above = stack.pop()
            mine = att.owner.get(node.id) if node.known and node is not att.server else None
            if above is not None and above[0] != mine:
                att.context[node.id] = above
            if isinstance(mine, int) and (above is None or above[0] != mine):
                above = (mine, node)
            stack.extend((c, above) for c in node.children)


def _by_evidence(att: Attribution, cands: Candidates) -> None:
    """A process the clock and the pid marks left to several calls goes to the one its
    records (or its descendants') name, with why; named by several, it stays theirs."""
    for top in list(att.nodes()):
        owner = att.owner.get(top.id)
        if not isinstance(owner, tuple):
            continue
        p = top.parent
        if p is not None and att.owner.get(p.id) == owner:
            continue  # not a top: it goes with the process that started it
        mine = [n for n in top.walk() if n.known and att.owner.get(n.id) == owner]
        found = cands.choose(owner, mine)
        one = found.one
        if one is not None:
            call, why = one
            head = f"pid {top.pid} ({top.images[0].command})"
            att.among[top.id] = owner
            for n in mine:
                att.owner[n.id] = call
                att.reasons[n.id] = why if n is top else f"started by {head}, for which {why}"
        elif 1 < len(found.named) < len(owner):
            narrowed = tuple(sorted(found.named))
            for n in mine:
                att.owner[n.id] = narrowed
