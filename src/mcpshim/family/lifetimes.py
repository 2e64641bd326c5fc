"""Which processes outlived the call that started them, and how: a helper the server keeps,
a detached one, or one alive when the session ended.

A process started during a call and alive when the call returned outlived it. That alone is
routine for the servers people run (GitPython keeps `git cat-file --batch` between calls, a
browser server keeps its browser): what a reviewer fears is a process that left the
family's care. So each is one of:

- `survived`: still running when the session ended (the supervisor's `survivor` record);
- `detached`: it lost the parent that started it while it ran: the supervisor, a child
  subreaper, reaped it (`reaped`), or the trace shows its parent exit first (a double
  fork, `setsid` and exit, a `spawn(..., {detached: true})` whose caller returned);
- `kept`: still under the process that started it, and gone by the session's end: the
  trace saw it exit before its parent did, or `mcpshim run` (a child subreaper, which
  records every orphan it reaps and every survivor) ended the session with no record of
  it; without either, nothing vouches for it and it is `unaccounted`.

The evidence that it was alive after the call: the relay's list of family members alive at
the response, a later sample, the trace's exit time, a later lifetime record.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Protocol

from mcpshim.family.calls import Call
from mcpshim.family.images import parse_time
from mcpshim.family.overlap import Owner
from mcpshim.family.tree import Node
from mcpshim.log.execlog import EventRecord


class Attribution(Protocol):
    """What of a session's attribution (family.attribution, which calls `mark_outlived`)
    the lifetimes read and fill."""

    @property
    def start(self) -> Mapping[str, Any] | None: ...
    @property
    def end(self) -> Mapping[str, Any] | None: ...
    @property
    def calls(self) -> Sequence[Call]: ...
    @property
    def server(self) -> Node | None: ...
    @property
    def owner(self) -> Mapping[int, Owner]: ...
    @property
    def start_of(self) -> Mapping[int, tuple[float, float] | None]: ...
    @property
    def outlived(self) -> dict[int, tuple[str, str]]: ...
    @property
    def outlived_kind(self) -> dict[int, tuple[str, str]]: ...

    def nodes(self) -> Iterator[Node]: ...


__all__ = ["DETACHED", "KEPT", "SURVIVED", "UNACCOUNTED", "Sightings", "mark_outlived",
           "sightings"]  # fmt: skip

KEPT, DETACHED, SURVIVED, UNACCOUNTED = "kept", "detached", "survived", "unaccounted"
_LATE = 0.05  # a sampler's or reaper's time is when it wrote, a little after it looked
_SLACK = 0.002  # clock anchoring jitter

Ident = tuple[int, int | None]
Sightings = dict[Ident, list[tuple[float, str, str]]]  # (time, kind, evidence text)


def sightings(events: list[EventRecord]) -> Sightings:
    """The session's lifetime records by process: survivors, reaped orphans, samples."""
    seen: Sightings = {}
    for ev in events:
        if ev.kind not in ("survivor", "reaped", "observed"):
            continue
        pid, t = ev.data.get("pid"), parse_time(ev.data.get("time"))
        if isinstance(pid, int) and t is not None:
            what = {
                "survivor": "still running when the session ended",
                "reaped": "reaped at",
                "observed": "seen running by the sampler at",
            }[ev.kind]
            text = f"{what} {t.isoformat()}" if ev.kind != "survivor" else what
            seen.setdefault((pid, ev.data.get("start")), []).append(
                (t.timestamp(), ev.kind, f"{ev.where}: {ev.kind} record: {text}")
            )
    return seen


def _ran(node: Node) -> bool:
    """It ran something: an exec, or a fork of its parent's program. An exec the kernel or
    a contained session refused ran nothing, so it outlived nothing."""
    return any(i.entry or i.source == "trace-fork" for i in node.images)


def _when(t: float, tz: datetime) -> str:
    return datetime.fromtimestamp(t, tz.tzinfo or timezone.utc).isoformat()


def _alive_after(
    att: Attribution, node: Node, resp: datetime, seen: Sightings,
    exits: Mapping[tuple[str, int, int | None], datetime],
) -> tuple[str, str] | None:  # fmt: skip
    """(where, what) shows it alive after the call returned at `resp`, or None."""
    r = resp.timestamp()
    when = resp.isoformat()
    iv = att.start_of.get(node.id)
    if iv is not None and iv[0] > r:
        started = _when(iv[0] + _SLACK, resp)
        return node.images[0].where, f"started at {started}, after the call returned at {when}"
    ident = (node.pid, node.start)
    for c in att.calls:
        if c.alive_time is not None and c.alive_time.timestamp() > r and ident in c.alive:
            return c.where, (f"still running at {c.alive_time.isoformat()}, after the call "
                             f"returned at {when}")  # fmt: skip
    ended = exits.get((node.boot_id, node.pid, node.start))
    if ended is not None:
        if ended.timestamp() > r + _LATE:
            return "", f"exited at {ended.isoformat()}, after the call returned at {when}"
        return None  # the trace saw it end in time
    # A reaped record's time is when the subreaper collected the exit, which can come a
    # sampling tick later: it says when the process was gone by, not that it still ran.
    late = [(t, text) for t, k, text in seen.get(ident, ()) if t > r + _LATE and k != "reaped"]
    if late:
        return "", f"{late[-1][1]} (the call returned at {when})"
    return None


def _parent_gone(
    p: Node | None,
    seen: Sightings,
    exits: Mapping[tuple[str, int, int | None], datetime],
    server: Node | None,
    last_call: float,
    late: frozenset[Ident] = frozenset(),
) -> tuple[float, str] | None:
    """When the parent was gone by, and how that is known: the trace's exit; untraced, its
    own reaped record (the subreaper collects an orphan as it exits), or no earlier than
    the last call's return where it was alive then (`late`: the family the relay saw
    alive after the last answer) or is the server (which wrote that answer)."""
    if p is None or not p.known:
        return None
    end = exits.get((p.boot_id, p.pid, p.start))
    if end is not None:
        return end.timestamp(), f"exited at {end.isoformat()}"
    reaped = [t for t, k, _x in seen.get((p.pid, p.start), ()) if k == "reaped"]
    if reaped:
        return min(reaped), "was reaped as it ended"
    if (p is server or (p.pid, p.start) in late) and last_call != math.inf:
        return last_call, "was still running after the last call returned"
    return None


def _kind(
    node: Node,
    seen: Sightings,
    exits: Mapping[tuple[str, int, int | None], datetime],
    accounted: bool,
    last_call: float,
    server: Node | None = None,
    late: frozenset[Ident] = frozenset(),
) -> tuple[str, str]:
    """How it outlived its call, and why that is said. `accounted`: a subreaper supervised
    the session to its end (so an orphan or a survivor would be on record). `last_call`:
    when the session's last call returned; a process orphaned after it, as the server's
    family shut down (cclsp signals its language server and exits), that ended before the
    session did escaped nothing: it ended with the server."""
    kinds = {k for _t, k, _x in seen.get((node.pid, node.start), ())}
    if "survivor" in kinds:
        return SURVIVED, "still running when the session ended"
    p = node.parent
    p_end = exits.get((p.boot_id, p.pid, p.start)) if p is not None and p.known else None
    mine = exits.get((node.boot_id, node.pid, node.start))
    orphaned = "reaped" in kinds or (p_end is not None and (mine is None or p_end < mine))
    gone = _parent_gone(p, seen, exits, server, last_call, late) if orphaned else None
    if p is not None and gone is not None and gone[0] >= last_call:
        return KEPT, (f"ended with the server's family: its parent {p.current.command} "
                      f"{gone[1]}, after the last call returned")  # fmt: skip
    if "reaped" in kinds:
        return DETACHED, "its parent exited while it ran: mcpshim run reaped it"
    if orphaned and p is not None and p_end is not None:
        return DETACHED, (f"its parent {p.current.command} (pid {p.pid}) exited first, "
                          f"at {p_end.isoformat()}")  # fmt: skip
    if accounted or (node.boot_id, node.pid, node.start) in exits:
        return KEPT, "kept by its parent and gone by the session's end"
    return UNACCOUNTED, "no supervisor accounted for it: it may have left its parent or lived on"


def mark_outlived(
    att: Attribution,
    seen: Sightings,
    exits: Mapping[tuple[str, int, int | None], datetime],
) -> None:
    """Fill `att.outlived` (node id -> (where, what shows it)) and `att.outlived_kind`."""
    accounted = bool(att.start and att.start.get("subreaper") is True and att.end is not None)
    returned = [c.response.timestamp() for c in att.calls if c.response is not None]
    last_call = max(returned, default=math.inf)
    late = frozenset(i for c in att.calls if c.alive_time is not None
                     and c.alive_time.timestamp() >= last_call for i in c.alive)  # fmt: skip
    for node in att.nodes():
        owner = att.owner.get(node.id)
        if not isinstance(owner, int) or node is att.server or not _ran(node):
            continue
        call = att.calls[owner]
        if call.response is None:
            continue
        found = _alive_after(att, node, call.response, seen, exits)
        if found is None:
            continue
        att.outlived[node.id] = found
        att.outlived_kind[node.id] = _kind(
            node, seen, exits, accounted, last_call, att.server, late
        )
