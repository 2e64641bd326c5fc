"""The article's question, answered per tool call: what ran, from where, was it new, did it
reach the network, did it come from a file the agent can edit, did it outlive the call.

Review's findings say what is wrong; a reviewer of a session also needs what is *there*,
call by call, so that "nothing" is an answer too. `call_verdicts` reads each call's
processes from the attribution and its findings (already filed under it by
`review.filing.regroup`) and answers each question in a few words. Routine events (a pinned
git through PATH, a plain `sh -c` of one command) answer "no" and stay info findings.

"reached the network" is what was observed, never a guess: in a session whose socket calls
were traced, the kernel's facts (family.netfacts: a connection made, a datagram sent, a
socket listened on), whatever the policy lists; an attempt that failed is "tried" instead.
Untraced, the sampler's sockets (MCS303, MCS304). A destination a helper's arguments name
(MCS108, MCS109) is a hint, said as one.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mcpshim.family.attribution import Attribution
from mcpshim.family.netfacts import destination, fact_json, kind_of, phrase
from mcpshim.family.overlap import calls_label, ran_images, ran_line
from mcpshim.family.tree import Image, Node
from mcpshim.log.netrecords import NetRecord
from mcpshim.review import catalogue
from mcpshim.review.filing import started_by
from mcpshim.review.findings import CALL_QUESTIONS, CallRef, Finding, Severity
from mcpshim.review.rules.execpaths import script_of
from mcpshim.review.rules.mcp_rules import AMBIGUOUS, call_group, call_ref, overlap_group
from mcpshim.review.shapes import canonical

__all__ = ["CallVerdict", "call_verdicts", "questions"]


@functools.cache
def questions() -> tuple[tuple[str, str, frozenset[str]], ...]:
    """The questions, in the order they are answered, and the rules whose findings answer
    "yes", as each rule declares where it is defined (findings.define_rule)."""
    every = catalogue.rules().values()
    return tuple((key, text, frozenset(r.id for r in every if key in (r.answers or ())))
                 for key, text in CALL_QUESTIONS.items())  # fmt: skip


_MAX_RAN = 8


@dataclass(frozen=True)
class CallVerdict:
    call: CallRef
    label: str  # "tools/call run_test (id 3)"
    group: str  # the heading its findings are under
    ran: tuple[str, ...]  # each distinct command line, with how many times
    where: tuple[str, ...]  # the directories the executables ran from
    answers: tuple[tuple[str, str, tuple[str, ...]], ...]  # (key, question, what says yes)
    severity: Severity | None  # the worst finding under the call, if any
    is_error: bool | None
    #: what it may have run, shared with overlapping calls ("one of 8 `git --version`...")
    may_have_run: tuple[str, ...] = ()
    #: per question, findings about processes it may have run (key -> what says maybe)
    maybe: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: what evidence filed under it among overlapping calls, and why
    filed_by_evidence: tuple[str, ...] = ()
    overlap: str = ""  # the heading of its group of overlapping calls, if any
    #: traced sessions: each socket call of the call's processes (family.netfacts.fact_json)
    net: tuple[dict[str, object], ...] = ()
    net_traced: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            **self.call.to_json(),
            "group": self.group,
            "is_error": self.is_error,
            "severity": self.severity.label if self.severity is not None else None,
            "ran": list(self.ran),
            "from": list(self.where),
            **{key: list(yes) for key, _q, yes in self.answers},
            "may_have_run": list(self.may_have_run),
            "maybe": {key: list(why) for key, why in self.maybe},
            "filed_by_evidence": list(self.filed_by_evidence),
            "overlap_group": self.overlap or None,
            "network_evidence": "traced" if self.net_traced else "sampled",
            "net": list(self.net),
        }


def _owned(att: Attribution) -> dict[int, list[Node]]:
    """Each call's processes, in one walk (a walk per call is quadratic)."""
    out: dict[int, list[Node]] = {}
    for node in att.nodes():
        owner = att.owner.get(node.id)
        if isinstance(owner, int):
            out.setdefault(owner, []).append(node)
    return out


def _ran(att: Attribution, call: int, nodes: list[Node]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What a call ran, each command line once with how many times, and where from; a
    process another call's process started says in which ("in bash (pid 7), which ...")."""
    counts: dict[str, int] = {}
    dirs: dict[str, None] = {}
    for node in nodes:
        where = started_by(att, node, call) if node.id in att.context else ""
        for img in ran_images(node):  # each exec is one image (family.model)
            line = ran_line(img) + (f" ({where})" if where else "")
            counts[line] = counts.get(line, 0) + 1
            target = os.fsdecode(img.target)
            if target.startswith("/"):
                dirs[os.path.dirname(canonical(target))] = None
    lines = [f"{k} (x{n})" if n > 1 else k for k, n in counts.items()]
    if len(lines) > _MAX_RAN:
        lines = [*lines[:_MAX_RAN], f"and {len(lines) - _MAX_RAN} more"]
    return tuple(lines), tuple(dirs)


def _editable(nodes: list[Node]) -> list[str]:
    """What a call ran from a file the agent can edit besides a package runner's scripts
    (MCS107): a git hook, a script an interpreter ran from a writable directory."""
    out: dict[str, None] = {}
    for node in nodes:
        for img in node.images:
            if not img.entry:
                continue
            target = os.path.join(os.fsdecode(img.cwd), os.fsdecode(img.target))
            script = script_of(img)
            if "/.git/hooks/" in target:
                out[f"git hook {target}"] = None
            elif script and os.access(os.path.dirname(script), os.W_OK):
                out[f"{img.command} ran {script}, in a directory the agent can write"] = None
    return list(out)


NetFact = tuple[Node, Image | None, NetRecord]


def facts_by_call(att: Attribution) -> dict[int, list[NetFact]]:
    """Each socket call of the session (the server's own too) under the call in flight
    when it was made (family.attribution.owner_at), in time order: what review's network
    findings are filed by too (review.filing.regroup), so a call's block and its findings say
    the same."""
    out: dict[int, list[NetFact]] = {}
    for node, img, n in att.net.facts(att.nodes()):
        owner = att.owner_at(node, n.time, destination(n))
        if isinstance(owner, int):
            out.setdefault(owner, []).append((node, img, n))
    return out


def _net(
    att: Attribution, call: int, facts: list[NetFact]
) -> tuple[dict[str, list[str]], list[dict[str, object]]]:
    """A traced session's answers from the kernel's facts, and the facts as JSON."""
    said: dict[str, dict[str, None]] = {"network": {}, "tried": {}}
    out = []
    for node, img, n in facts:
        where = started_by(att, node, call)
        out.append({**fact_json(n, img), **({"context": where} if where else {})})
        kind = kind_of(n)
        key = "network" if kind in ("reached", "listened") else "tried" if kind == "tried" else ""
        if key:
            name = img.command if img is not None else "?"
            tail = f" ({where})" if where else ""
            said[key][f"{name} (pid {node.pid}) {phrase(n)}{tail}"] = None
    return {k: list(v) for k, v in said.items()}, out


def _short(f: Finding) -> str:
    return f"{f.rule.id}: {f.message}"


Ident = tuple[str, int, int | None]


def _maybe(att: Attribution, findings: Sequence[Finding]) -> dict[int, dict[str, list[str]]]:
    """Per call of an overlap group, per question, the findings about processes it may
    have started (filed under the group by review.filing.regroup)."""
    heads = {overlap_group(att, g) for g in att.overlaps}
    if not heads:
        return {}
    cands: dict[Ident, tuple[int, ...]] = {}
    for g in att.overlaps:
        for top in g.tops:
            owner = att.owner.get(top.id)
            for n in top.walk():
                if n.known and isinstance(owner, tuple):
                    cands[(n.boot_id, n.pid, n.start)] = owner
    out: dict[int, dict[str, list[str]]] = {}
    for f in findings:
        if f.group not in heads or f.rule.id == AMBIGUOUS.id:
            continue
        keys = [key for key, _q, rules in questions() if f.rule.id in rules]
        if not keys:
            continue
        calls: set[int] = set()
        for ev in f.evidence:
            d = ev.data
            start = d["start_ticks"] if "start_ticks" in d else d.get("start")
            calls.update(cands.get((str(d.get("boot_id")), int(d.get("pid") or -1), start), ()))
        for c in calls:
            for key in keys:
                out.setdefault(c, {}).setdefault(key, []).append(_short(f))
    return out


def call_verdicts(atts: Iterable[Attribution], findings: Sequence[Finding]) -> list[CallVerdict]:
    """One verdict per recorded call of every relayed session, in the order made."""
    by_call: dict[tuple[str, object, str], list[Finding]] = {}
    for f in findings:
        if f.call is not None:
            by_call.setdefault((f.call.session, f.call.id, f.call.time), []).append(f)
    out = []
    for att in atts:
        owned = _owned(att)
        by_time = facts_by_call(att) if att.net.is_traced(att.session) else {}
        maybe = _maybe(att, findings)
        group_of = {
            c: head for g in att.overlaps for head in [overlap_group(att, g)] for c in g.calls
        }
        for call in att.calls:
            ref = call_ref(att, call)
            mine = by_call.get((ref.session, ref.id, ref.time), [])
            mine_nodes = owned.get(call.index, [])
            ran, where = _ran(att, call.index, mine_nodes)
            extra = {"editable": _editable(mine_nodes)}
            traced = att.net.is_traced(att.session)
            facts: list[dict[str, object]] = []
            if traced:  # the kernel's facts answer the network questions, not findings
                observed, facts = _net(att, call.index, by_time.get(call.index, []))
                extra.update(observed)
            answers = tuple(
                (key, question, (*(_short(f) for f in mine if f.rule.id in rules
                                   and not (traced and key in ("network", "tried"))),
                                 *extra.get(key, ())))
                for key, question, rules in questions()
            )  # fmt: skip
            worst = max((f.level for f in mine), default=None)
            filed = tuple(
                f"{n.images[0].command} (pid {n.pid}): {att.reasons[n.id]} (among calls "
                f"{calls_label(att.among[n.id])}, in flight when it started)"
                for n in mine_nodes
                if n.id in att.among
            )
            may = maybe.get(call.index, {})
            maybes = tuple(
                (k, tuple(dict.fromkeys(may[k]))) for k, _q, _r in questions() if k in may
            )
            out.append(
                CallVerdict(
                    ref,
                    call.label,
                    call_group(att, call),
                    ran,
                    where,
                    answers,
                    worst,
                    call.is_error,
                    tuple(m.text() for m in att.may_have_run(call.index)),
                    maybes,
                    filed,
                    group_of.get(call.index, ""),
                    tuple(facts),
                    traced,
                )
            )
    return out
