"""Where each finding about a relayed session goes: under the tool call each of its facts
belongs to (family.attribution: a process by when it started, a moment by when it
happened), under a group of overlapping calls, or under the session between calls; and
what a finding says once it is there (in which process, the call's argument in its line).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from mcpshim.family.attribution import Attribution
from mcpshim.family.evidence import arg_values
from mcpshim.family.images import parse_time
from mcpshim.family.overlap import Owner, calls_label
from mcpshim.family.tree import Node
from mcpshim.review.findings import CallRef, Evidence, Finding, Severity
from mcpshim.review.rules.connections import NET_RULES, net_message
from mcpshim.review.rules.mcp_rules import SESSION_WIDE, call_group, call_ref, overlap_group

__all__ = ["regroup", "started_by"]


Ident = tuple[str, int, int | None]  # (boot id, pid, start ticks)
Place = tuple[str, CallRef | None]  # the heading evidence goes under, and its call


@dataclass(frozen=True)
class _Filing:
    """Where each piece of evidence goes: a process's (its start) under the call in flight
    when it started (and why, where evidence chose it among overlapping calls), or its
    overlap group; a moment's (`at`: a socket call, a refused connect) under the call in
    flight at that moment, whichever process made it (family.attribution.owner_at)."""

    calls: dict[Ident, Place] = field(default_factory=dict)
    why: dict[Ident, str] = field(default_factory=dict)
    groups: dict[Ident, str] = field(default_factory=dict)
    nodes: dict[Ident, tuple[Attribution, Node | None]] = field(default_factory=dict)
    arguments: dict[CallRef, Any] = field(default_factory=dict)  # each call's, as recorded

    def add(self, att: Attribution) -> None:
        heads: dict[int, Place] = {}  # per call, not per process
        for node in att.nodes():
            ident = (node.boot_id, node.pid, node.start)
            self.nodes[ident] = (att, node)
            owner = None if node is att.server else att.owner.get(node.id)
            if isinstance(owner, int):
                head = heads.get(owner)
                if head is None:
                    call = att.calls[owner]
                    head = heads[owner] = (call_group(att, call), call_ref(att, call))
                    self.arguments[head[1]] = call.arguments
                self.calls[ident] = head
                if node.id in att.reasons:
                    self.why[ident] = att.reasons[node.id]
        if att.server is None and att.start is not None:  # the server's own moments
            start = att.start
            ident = (str(start.get("boot_id")), int(start.get("child_pid") or -1),
                     start.get("child_start"))  # fmt: skip
            self.nodes.setdefault(ident, (att, None))
        for g in att.overlaps:  # what could be several calls': under their group
            heading = overlap_group(att, g)
            for top in g.tops:
                for node in top.walk():
                    if node.known:
                        self.groups[(node.boot_id, node.pid, node.start)] = heading

    def _moment(self, ident: Ident, ev: Evidence, default: str) -> tuple[Place, Evidence]:
        """A fact with its own time, under the call in flight then."""
        att, node = self.nodes[ident]
        t = parse_time(ev.data.get("at"))
        named = str(ev.data.get("destination") or ev.data.get("raddr") or "")
        owner = att.owner_at(node, t, named) if t is not None else None
        if isinstance(owner, int):
            call = att.calls[owner]
            ev = _with_context(att, node, owner, ev)
            return (call_group(att, call), call_ref(att, call)), ev
        if isinstance(owner, tuple):
            text = f"{ev.text}; made while calls {calls_label(owner)} were in flight"
            return (default, None), replace(ev, text=text, data={
                **ev.data, "candidate_calls": [att.calls[i].id for i in owner]})  # fmt: skip
        return (default, None), _with_context(att, node, None, ev)

    def place(self, ev: Evidence, default: str) -> tuple[Place, Evidence]:
        d = ev.data
        start = d["start_ticks"] if "start_ticks" in d else d.get("start")
        ident = (str(d.get("boot_id")), int(d.get("pid") or -1), start)
        if "at" in d and ident in self.nodes:
            return self._moment(ident, ev, self.groups.get(ident, default))
        found = self.calls.get(ident)
        if found is None:
            return (self.groups.get(ident, default), None), ev
        att, node = self.nodes[ident]
        if node is not None and node.id in att.context:  # in what another call started
            ev = _with_context(att, node, att.owner.get(node.id), ev)
        if ident in self.why:  # filed among overlapping calls: say why
            reason = self.why[ident]
            ev = replace(ev, text=f"{ev.text}; filed under this call: {reason}",
                         data={**ev.data, "call_evidence": reason})  # fmt: skip
        return found, ev


_LINE_RULES = frozenset({"MCS105", "MCS401"})


def _spliced(f: Finding, arguments: Any) -> Finding:
    """A composed shell line filed under a call that holds one of the call's argument
    values inside it, not as the whole line: quoting decides what that value becomes in
    the line, so it is medium (docs/verdicts.md). A tool given the line to run gets it as
    it asked; a line the server wrote with nothing of the call in it is routine."""
    if f.rule.id not in _LINE_RULES or f.level != Severity.LOW or arguments is None:
        return f
    values = [(w, v) for w, v in arg_values(arguments) if len(v.strip()) >= _SPLICE_MIN]
    for ev in f.evidence:
        line = str(ev.data.get("inner") or "")
        for where, v in values:
            if v in line and v.strip() != line.strip():
                said = f"{f.message}; it holds the call's argument {where} ({v[:60]!r})"
                return replace(f, message=said, severity=Severity.MEDIUM)
    return f


_SPLICE_MIN = 2


def started_by(att: Attribution, node: Node | None, owner: Owner) -> str:
    """Where a fact of `node` happened, when that is not what its own call started: "in
    bash (pid 7), which tools/call session_create (id 3) started" (a terminal a later call
    used), "in the server" (its own process), "" otherwise."""
    if node is None or node is att.server:
        return "in the server's own process"
    here = att.owner.get(node.id)
    if isinstance(here, int) and here != owner:
        return f"in {node.current.command} (pid {node.pid}), which {att.calls[here].label} started"
    ctx = att.context.get(node.id)
    if ctx is not None and ctx[0] != owner:
        call, top = ctx
        return f"in {top.current.command} (pid {top.pid}), which {att.calls[call].label} started"
    return ""


def _with_context(att: Attribution, node: Node | None, owner: Owner, ev: Evidence) -> Evidence:
    where = started_by(att, node, owner)
    between = "between tool calls" if owner is None and att.calls else ""
    said = "; ".join(x for x in (between, where) if x)
    if not said:
        return ev
    return replace(ev, text=f"{ev.text} ({said})", data={**ev.data, "context": said})


def regroup(findings: Iterable[Finding], atts: Iterable[Attribution]) -> list[Finding]:
    """File each finding about a process under the tool call that started it.

    A finding folds every occurrence in a family; in a session relayed with --mcp each
    occurrence keeps its evidence (review.engine), so the finding is split: one finding per
    tool call, and one for what no call started. A finding whose occurrences are not all in
    its evidence (a session not relayed) is not split: whose they are is never guessed.
    Evidence of a moment (`at`: a socket call, a refused connect) goes under the call in
    flight then, whichever process made it (the server's own too), and says in which
    process when another call started that one; of a process several overlapping calls
    could have started, under their group (said once, MCS503).
    """
    filing = _Filing()
    for att in atts:
        filing.add(att)
    if not filing.calls and not filing.nodes and not filing.groups:
        return list(findings)
    out = []
    for f in findings:
        if f.count > len(f.evidence) or f.call is not None or f.rule.id in SESSION_WIDE:
            out.append(f)  # occurrences not in evidence: whose they are is unknown
            continue
        parts: dict[Place, list[Evidence]] = {}
        whose: dict[Place, dict[tuple[object, ...], set[object]]] = {}
        for ev in f.evidence:
            where, said = filing.place(ev, f.group)
            who = (said.data.get("boot_id"), said.data.get("pid"),
                   said.data.get("start_ticks", said.data.get("start")))  # fmt: skip
            facts = whose.setdefault(where, {})
            if "at" in said.data and said.data.get("said") in facts.get(who, ()):
                continue  # the same process's same fact again under one call: one occurrence
            facts.setdefault(who, set()).add(said.data.get("said"))
            parts.setdefault(where, []).append(said)
        for (group, ref), evidence in parts.items():
            n = len(whose[(group, ref)])  # occurrences: processes
            if ref is None:
                part = replace(f, group=group, evidence=tuple(evidence), count=n)
            else:
                key = _call_key(f, f"{ref.method} {ref.name}")
                part = replace(f, group=group, evidence=tuple(evidence), count=n, call=ref,
                               key=key)  # fmt: skip
                part = _spliced(part, filing.arguments.get(ref))
            if f.rule.id in NET_RULES:  # each part names what its own evidence shows
                part = replace(part, message=net_message(part))
            out.append(part)
    return out


def _call_key(f: Finding, tool: str) -> str:
    """A finding filed under a tool call is told apart by the tool (its fingerprint, in
    SARIF and JSON): the halves of a split finding are two results. The tool's name, not
    the call's time, so the fingerprint is the same from one session to the next."""
    return f"{f.key or f.message}\0{tool}"
