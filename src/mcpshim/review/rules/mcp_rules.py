"""Tool-call rules (MCS5xx): findings over a session's attribution, not over one image.

They need the whole session (which call started what, who lived how long), so instead of
registering a per-image check they are run by `session_findings` after review's pass
(review.filing then files review's own findings under the call each fact belongs to).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from mcpshim.family.attribution import Attribution, Call
from mcpshim.family.images import parse_time
from mcpshim.family.lifetimes import KEPT
from mcpshim.family.overlap import Overlap, calls_label, ran_images, ran_line
from mcpshim.family.tree import Image, Node
from mcpshim.family.view import evidence_line
from mcpshim.review.findings import CallRef, Evidence, Finding, Severity, define_rule
from mcpshim.review.policy import Policy
from mcpshim.review.rules.execpaths import script_of
from mcpshim.review.rules.explain import explained, family_of, in_a_line, named_by_arguments
from mcpshim.review.rules.unreadable import is_unreadable, unreadable_findings

__all__ = [
    "AMBIGUOUS",
    "OUTLIVED",
    "UNEXPLAINED",
    "UNPARSED",
    "call_group",
    "call_in_flight",
    "call_ref",
    "explained",
    "overlap_group",
    "session_findings",
]

OUTLIVED = define_rule(
    "MCS501",
    "process-outlived-tool-call",
    Severity.MEDIUM,
    "A process started by an MCP tool call was still running after the call returned and "
    "left the family's care: detached (its parent exited first, a subreaper reaped it) or "
    "alive when the session ended (medium). A helper the server keeps under it between "
    "calls and that ends with the session is said once per session (info).",
    "Make the tool wait for what it starts (or kill it before answering); run the server "
    "under `mcpshim run --on-exit terminate` so nothing outlives the session.",
    confidence="inferred",
    answers=("outlived",),
)
UNEXPLAINED = define_rule(
    "MCS502",
    "executable-not-explained-by-tool",
    Severity.MEDIUM,
    "An MCP tool call started an executable that the policy's [tools] entry for the tool "
    "does not list (medium), or, without an entry, that the tool's name does not explain "
    "(low: a name is a hint, not a declaration).",
    "Check why the tool runs it; if it is expected, list it under [tools] in the policy "
    '(e.g. run_test = ["npm", "sh", "node"]).',
    cwe=["CWE-78"],
    confidence="hint",
    answers=(),
)
AMBIGUOUS = define_rule(
    "MCS503",
    "tool-call-attribution-ambiguous",
    Severity.LOW,
    "Overlapping MCP tool calls: a process could have been started by either call.",
    "Nothing is guessed: review these processes under each candidate call, or have the "
    "client serialise calls to this server when attribution matters.",
    confidence="inferred",
    answers=(),
)
UNPARSED = define_rule(
    "MCS504",
    "mcp-message-not-json-rpc",
    Severity.LOW,
    "A message between the MCP client and server did not parse as JSON-RPC.",
    "It was relayed unchanged but not recorded; check the server writes only JSON-RPC "
    "lines to stdout (logs belong on stderr).",
    answers=(),
)


#: findings about the session as a whole (its working directory), said once, not per call
SESSION_WIDE = frozenset({"MCS104"})


def call_group(att: Attribution, call: Call) -> str:
    """The heading a call's findings go under. Review and report sort headings as text: the
    call's full UTC time comes first, so a session's calls come in the order they were made
    (and after the session's family)."""
    when = call.request.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    return f"session {att.session} tool call at {when}: {call.label}"


def _data(node: Node, img: Image, call: Call | None) -> dict[str, object]:
    out: dict[str, object] = {
        "command": img.command,
        "path": os.fsdecode(img.target),
        "pid": node.pid,
        "start_ticks": node.start,
        "boot_id": node.boot_id,
    }
    if call is not None:
        out.update({"call_id": call.id, "tool": call.name, "method": call.method})
    return out


def _owned(att: Attribution, ids: Iterable[int]) -> dict[int, list[int]]:
    """node ids by the call that owns them, in one pass (a pass per call is quadratic in a
    session of thousands of calls), in the order given."""
    out: dict[int, list[int]] = {}
    for i in ids:
        owner = att.owner.get(i)
        if isinstance(owner, int):
            out.setdefault(owner, []).append(i)
    return out


def _outlived_evidence(att: Attribution, n: Node, call: Call) -> Evidence:
    # The pointer names the process's own record; the record that shows it still running
    # (a response's family list, a sampler's, the trace's exit) is named in the text.
    where, text = att.outlived[n.id]
    how = att.outlived_kind[n.id][1]
    return Evidence(
        n.current.where,
        f"{evidence_line(n.current)}: {text}; {how}"
        + (f" ({where})" if where and where != n.current.where else ""),
        _data(n, n.current, call),
    )


def outlived_findings(att: Attribution, policy: Policy) -> list[Finding]:
    """MCS501: what a call started and left running after it answered. Detached, or alive
    when the session ended: medium, under the call. Kept by the server and gone by the end
    (GitPython's cat-file, a browser): said once for the session, as info (family.lifetimes)."""
    by_id = {n.id: n for n in att.nodes()}
    gone_by_call = _owned(att, att.outlived)
    out = []
    kept: list[tuple[Node, Call]] = []
    for call in att.calls:
        gone = []
        for i in gone_by_call.get(call.index, ()):
            if att.outlived_kind[i][0] == KEPT:
                kept.append((by_id[i], call))
            else:
                gone.append(by_id[i])
        if not gone:
            continue
        names = ", ".join(f"{n.current.command} (pid {n.pid})" for n in gone[:5])
        more = f" and {len(gone) - 5} more" if len(gone) > 5 else ""
        out.append(Finding(OUTLIVED, f"{len(gone)} process(es) started by {call.label} outlived "
                           f"it, detached or still running when the session ended: {names}{more}",
                           tuple(_outlived_evidence(att, n, call) for n in gone),
                           call_group(att, call), key=f"{call.name}\0outlived",
                           call=call_ref(att, call)))  # fmt: skip
    if kept:
        names = _counted(n.current.command for n, _c in kept)
        out.append(Finding(
            OUTLIVED, f"the server keeps {len(kept)} helper process(es) between calls, each "
            f"gone by the session's end: {names}",
            tuple(_outlived_evidence(att, n, c) for n, c in kept),
            f"session {att.session}", key="kept helpers", severity=Severity.INFO,
        ))  # fmt: skip
    return out


def unexplained_findings(att: Attribution, policy: Policy) -> list[Finding]:
    """MCS502: what a tools/call started that its [tools] entry, or its name and
    description, do not explain (one finding per tool call and command)."""
    by_id = {n.id: n for n in att.nodes()}
    owned = _owned(att, by_id)
    asked: dict[tuple[str, str], bool] = {}  # (tool, command): explained, asked once
    out = []
    for call in att.calls:
        if call.method != "tools/call":
            continue
        seen: dict[str, dict[int, tuple[Node, Image]]] = {}
        declared = call.name in policy.tools
        for node in (by_id[i] for i in owned.get(call.index, ())):
            if not declared and in_a_line(node, policy.trusted_dirs):
                continue  # a program of a shell line: the line is said (MCS105, MCS401)
            for img in (i for i in node.images if i.entry):  # what ran
                command = family_of(img.command, os.fsencode(script_of(img) or "") or img.target)
                if not declared and named_by_arguments(command, call.arguments):
                    continue  # the call asked for it by name (a [tools] entry still decides)
                ok = asked.get((call.name, command))
                if ok is None:
                    ok = asked[(call.name, command)] = explained(
                        call.name, img.command, policy.tools, att.descriptions.get(call.name, "")
                    )
                if not ok:
                    seen.setdefault(command, {}).setdefault(node.id, (node, img))
        how = "the policy's [tools] entry" if declared else "its name"
        for command, procs in sorted(seen.items()):
            evidence = tuple(Evidence(img.where, evidence_line(img), _data(node, img, call))
                             for node, img in procs.values())  # fmt: skip
            out.append(Finding(
                UNEXPLAINED, f"tool {call.name!r} started {command!r}, which {how} does not "
                "explain", evidence, call_group(att, call), key=f"{call.name}\0{command}",
                # A tool's name is a hint; a [tools] entry is what someone declared.
                severity=None if declared else Severity.LOW, count=len(procs),
                call=call_ref(att, call),
            ))  # fmt: skip
    return out


def overlap_group(att: Attribution, g: Overlap) -> str:
    """The heading of a group of overlapping calls: after the session's family, before
    its calls (headings sort as text)."""
    return f"session {att.session} overlapping tool calls {g.label}"


def _counted(items: Iterable[str], most: int = 8) -> str:
    counts: dict[str, int] = {}
    for x in items:
        counts[x] = counts.get(x, 0) + 1
    parts = [f"{k} (x{n})" if n > 1 else k for k, n in counts.items()]
    more = len(parts) - most
    return ", ".join(parts[:most]) + (f" and {more} more" if more > 0 else "")


def ambiguous_findings(att: Attribution, policy: Policy) -> list[Finding]:
    """MCS503: once per group of overlapping calls, every process (the top of each) that
    could belong to several of them, with what ran, counted."""
    out = []
    for g in att.overlaps:
        tools = _counted(att.calls[i].name for i in g.calls)
        lines = [f"`{ran_line(i)}`" for top in g.tops for n in top.walk() if n.known
                 for i in ran_images(n)]  # fmt: skip
        message = (f"{len(g.calls)} overlapping calls ({g.label}: {tools}) started processes "
                   "that could each belong to several of them, not said which: "
                   f"{_counted(lines) or 'no program'}")  # fmt: skip
        evidence = []
        for top in g.tops:
            img = top.images[0]
            cands = att.owner.get(top.id)
            idx = cands if isinstance(cands, tuple) else ()
            data = {**_data(top, img, None), "candidate_calls": [att.calls[i].id for i in idx]}
            text = f"{evidence_line(img)}; could be any of calls {calls_label(idx)}"
            evidence.append(Evidence(img.where, text, data))
        names = sorted({att.calls[i].name for i in g.calls})
        commands = sorted({top.images[0].command for top in g.tops})
        key = "\0".join([*commands, "", *names])
        out.append(Finding(AMBIGUOUS, message, tuple(evidence), overlap_group(att, g), key=key,
                           count=len(evidence)))  # fmt: skip
    return out


def unparsed_findings(att: Attribution, policy: Policy) -> list[Finding]:
    """MCS504: lines between client and server that were JSON but not JSON-RPC (those that
    could not be read completely are MCS505's: rules.unreadable)."""
    plain = [u for u in att.unparsed if not is_unreadable(u)]
    if not plain:
        return []
    ev = tuple(
        Evidence(str(u.get("where", "")),
                 f"{u.get('direction')} {u.get('size')} bytes: {u.get('reason')}")
        for u in plain[:5]
    )  # fmt: skip
    message = f"{len(plain)} message(s) did not parse as JSON-RPC"
    return [Finding(UNPARSED, message, ev, f"session {att.session}", key="unparsed")]


#: the tool-call rules, each a function of a session's attribution and the policy
SESSION_RULES = (
    outlived_findings, unexplained_findings, ambiguous_findings, unparsed_findings,
    unreadable_findings,
)  # fmt: skip


def session_findings(att: Attribution, policy: Policy) -> list[Finding]:
    """Every tool-call rule's findings for one relayed session."""
    return [f for rule in SESSION_RULES for f in rule(att, policy)]


def call_ref(att: Attribution, call: Call) -> CallRef:
    when = call.request.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return CallRef(att.session, call.method, call.name, call.id, when)


def call_in_flight(att: Attribution, when: object) -> Call | None:
    """The one call that was in flight at `when` (an ISO time), if exactly one was."""
    t = parse_time(when)
    if t is None:
        return None
    hit = [c for c in att.calls if c.request <= t and (c.response is None or t <= c.response)]
    return hit[0] if len(hit) == 1 else None
