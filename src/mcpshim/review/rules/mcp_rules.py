"""Tool-call rules (MCS5xx): findings over a session's attribution, not over one image.

They need the whole session (which call started what, who lived how long), so instead of
registering a per-image check they are run by `session_findings` after review's pass, and
`regroup` files review's own findings under the tool call whose process they are about.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from mcpshim.family.attribution import Attribution, Call
from mcpshim.family.images import parse_time
from mcpshim.family.lifetimes import KEPT
from mcpshim.family.overlap import Overlap, Owner, calls_label, ran_images, ran_line
from mcpshim.family.tree import Image, Node
from mcpshim.family.view import evidence_line
from mcpshim.review.findings import CallRef, Evidence, Finding, Severity, define_rule
from mcpshim.review.policy import Policy
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
    "regroup",
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
)
AMBIGUOUS = define_rule(
    "MCS503",
    "tool-call-attribution-ambiguous",
    Severity.LOW,
    "Overlapping MCP tool calls: a process could have been started by either call.",
    "Nothing is guessed: review these processes under each candidate call, or have the "
    "client serialise calls to this server when attribution matters.",
)
UNPARSED = define_rule(
    "MCS504",
    "mcp-message-not-json-rpc",
    Severity.LOW,
    "A message between the MCP client and server did not parse as JSON-RPC.",
    "It was relayed unchanged but not recorded; check the server writes only JSON-RPC "
    "lines to stdout (logs belong on stderr).",
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


_SPLIT = re.compile(r"[^a-z0-9]+")
# Words in tool names that name a family of executables rather than one.
_ALIASES = {
    "shell": ("sh", "bash", "dash", "zsh"),
    "python": ("python", "python3"),
    "node": ("node", "nodejs"),
}


def _words(name: str) -> set[str]:
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    return {w for w in _SPLIT.split(name) if w}


#: a tool that says it runs whatever command it is given (`run_command`, `shell_execute`,
#: "Execute a shell command"): every program it starts is what it said it does
_RUNS_ANY = re.compile(
    r"\b(run|runs|running|execute|executes|executing|exec)\b\W+(?:\w+\W+){0,4}?"
    r"(command|commands|cmd|shell|terminal|program|programs|script|scripts|tests?)\b",
    re.IGNORECASE,
)
#: two of these in a tool's name: it runs what it is given (a test runner runs the project's
#: tests: node, sh, whatever the project's runner starts)
_RUNNER_WORDS = frozenset({"shell", "terminal", "bash", "cmd", "command", "commands", "exec",
                           "execute", "run", "test", "tests"})  # fmt: skip


def runs_any_command(tool: str, description: str = "") -> bool:
    """The tool's name or description says it runs arbitrary commands."""
    words = _words(tool)
    if len(words & _RUNNER_WORDS) >= 2 or words & {"shell", "terminal", "bash"}:
        return True
    return bool(_RUNS_ANY.search(tool.replace("_", " ")) or _RUNS_ANY.search(description))


def explained(
    tool: str, command: str, tools: Mapping[str, tuple[str, ...]], description: str = ""
) -> bool:
    """The policy's [tools] entry decides; without one, the tool's name must say it (or its
    name and description say it runs any command)."""
    if tool in tools:
        return command in tools[tool]
    if runs_any_command(tool, description):
        return True
    name = re.sub(r"[0-9.]+$", "", command.lower()) or command.lower()
    words = _words(tool)
    return bool({command.lower(), name} & words) or any(name in _ALIASES.get(w, ()) for w in words)


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
        for node in (by_id[i] for i in owned.get(call.index, ())):
            for img in (i for i in node.images if i.entry):  # what ran
                ok = asked.get((call.name, img.command))
                if ok is None:
                    ok = asked[(call.name, img.command)] = explained(
                        call.name, img.command, policy.tools, att.descriptions.get(call.name, "")
                    )
                if not ok:
                    seen.setdefault(img.command, {}).setdefault(node.id, (node, img))
        declared = call.name in policy.tools
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
        whose: dict[Place, set[tuple[object, ...]]] = {}
        for ev in f.evidence:
            where, said = filing.place(ev, f.group)
            who = (said.data.get("boot_id"), said.data.get("pid"),
                   said.data.get("start_ticks", said.data.get("start")))  # fmt: skip
            if "at" in said.data and who in whose.get(where, ()):
                continue  # the same process's same fact again under one call: one occurrence
            whose.setdefault(where, set()).add(who)
            parts.setdefault(where, []).append(said)
        for (group, ref), evidence in parts.items():
            if ref is None:
                part = replace(f, group=group, evidence=tuple(evidence), count=len(evidence))
            else:
                key = _call_key(f, f"{ref.method} {ref.name}")
                part = replace(f, group=group, evidence=tuple(evidence), count=len(evidence),
                               call=ref, key=key)  # fmt: skip
            out.append(part)
    return out


def _call_key(f: Finding, tool: str) -> str:
    """A finding filed under a tool call is told apart by the tool (its fingerprint, in
    SARIF and JSON): the halves of a split finding are two results. The tool's name, not
    the call's time, so the fingerprint is the same from one session to the next."""
    return f"{f.key or f.message}\0{tool}"
