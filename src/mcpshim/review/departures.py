"""Departures from an approval (mcpshim.lock): the transitions worth a reviewer's time, not
every fork.

Against the lock's entry for the session's server: a tool whose definition changed (with a
readable diff: description words, schema fields, annotations; graded info when only the
order of the same words and list items changed), a new or removed tool, a changed server contract or
resource/prompt; and per tool call, against that tool's approved boundary: a new
executable, a known path with a new identity (its content hash changed), a new subcommand
shape, a new cwd root, a new network destination, a newly held credential name, a process
that outlived its call where the card said none. What the server ran outside tool calls is
held to the lock's start-up boundary. A process of overlapping calls departs only when it
departs from every candidate tool (nothing is guessed). Identities are read from the disk
now (contract.identity), once per path.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

from mcpshim.base.display import escape
from mcpshim.contract.canon import short
from mcpshim.contract.drift import drift, line_diff, parse_lock_definition
from mcpshim.contract.identity import Identities
from mcpshim.contract.lockfile import Boundary, Executable, ServerApproval, ToolApproval
from mcpshim.family.attribution import Attribution, Owner
from mcpshim.family.tree import Node
from mcpshim.family.view import evidence_line
from mcpshim.review.boundary import Seen, SessionEvidence, Use, seen_by_owner, tool_of
from mcpshim.review.departure_rules import (
    DRIFT,
    GONE_TOOL,
    LISTING_CHANGED,
    NEW_CRED,
    NEW_CWD,
    NEW_DEST,
    NEW_EXEC,
    NEW_IDENTITY,
    NEW_SERVER,
    NEW_SHAPE,
    NEW_TOOL,
    OUTLIVED,
    SERVER_CHANGED,
)
from mcpshim.review.fileseen import file_departures
from mcpshim.review.findings import Evidence, Finding, Rule, Severity
from mcpshim.review.rules.contain_rules import (
    PAST_RULESET,
    blocked_departures,
    past_ruleset_message,
)
from mcpshim.review.rules.mcp_rules import call_group, call_in_flight
from mcpshim.review.rules.terminated import terminated_finding
from mcpshim.review.shapes import name_key, under

__all__ = ["departures"]


@dataclass(frozen=True)
class _Where:
    group: str
    tool: str  # the key's tool part (the same from one session to the next)


def _finding(
    rule: Rule,
    msg: str,
    ev: Iterable[Evidence],
    at: _Where,
    key: str,
    severity: Severity | None = None,
) -> Finding:
    return Finding(rule, msg, tuple(ev), at.group, key=f"{at.tool}\0{key}", severity=severity)


def _node_ev(node: Node, call_id: object = None) -> Evidence:
    img = node.current
    data: dict[str, object] = {
        "command": img.command,
        "path": img.target.decode("utf-8", "surrogateescape"),
        "pid": node.pid,
        "start_ticks": node.start,
        "boot_id": node.boot_id,
    }
    if call_id is not None:
        data["call_id"] = call_id
    return Evidence(img.where, evidence_line(img), data)


def _diff(old: str, new: str) -> list[str]:
    return [escape(line) for line in line_diff(old, new, hunks=True)]


def _union(tools: Iterable[str | None], server: ServerApproval) -> Boundary:
    """What was approved for these owners. The server's own part (None: what no call asked
    for, a helper the server keeps doing its work, review.lockscope) is its start-up's and
    every tool's: a program or destination any of its tools was approved for, the server
    may use on its own account (GitPython's cat-file is a call's in one run and the
    server's in the next, as Python collects its objects)."""
    tools = list(tools)
    parts = [server.tools[t].boundary if t in server.tools else None for t in tools if t]
    if None in tools:
        parts.append(server.startup)
        parts += [t.boundary for t in server.tools.values()]
    got = [p for p in parts if p is not None]
    if len(got) == 1:
        return got[0]
    execs: dict[str, Executable] = {}
    for e in (e for b in got for e in b.executables):  # one program's shapes, all approved
        had = execs.get(e.path)
        execs[e.path] = e if had is None else replace(
            had, shapes=tuple(dict.fromkeys((*had.shapes, *e.shapes))))  # fmt: skip
    return Boundary(
        tuple(execs.values()),
        tuple(r for b in got for r in b.cwd_roots),
        tuple(d for b in got for d in b.destinations),
        tuple(d for b in got for d in b.listens),
        tuple(c for b in got for c in b.credential_env),
        tuple(u for b in got for u in b.users),
        any(b.outlives for b in got),
        tuple(c for b in got for c in b.credential_files),
        tuple(p for b in got for p in b.persistence),
        tuple(r for b in got for r in b.ran_written),
    )


def _boundary(
    seen: Seen, approved: Boundary, at: _Where, ids: Identities, unowned_high: bool = True
) -> list[Finding]:
    """Every departure of what one owner ran from its approved boundary, rule by rule."""
    return [
        *_exec_departures(seen, approved, at, ids, unowned_high),
        *_cwd_departures(seen, approved, at),
        *_dest_departures(seen, approved, at),
        *_cred_departures(seen, approved, at),
        *_outlived_departures(seen, approved, at),
        *file_departures(seen.files, approved, functools.partial(_made, at)),
    ]


def _made(
    at: _Where, rule: Rule, msg: str, ev: list[Evidence], key: str, sev: Severity | None
) -> Finding:
    return _finding(rule, msg, ev, at, key, sev)


def _exec_departures(
    seen: Seen, approved: Boundary, at: _Where, ids: Identities, unowned_high: bool
) -> Iterator[Finding]:
    """NEW_EXEC, NEW_IDENTITY, NEW_SHAPE: an executable the card does not list, one whose
    content changed, a subcommand shape it does not list."""
    found = ids.lookup(seen.uses)
    for path, use in sorted(seen.uses.items()):
        escapes = _past_ruleset(use)
        if escapes:  # MCS411, as plain review says it: one escape, one severity
            for msg, node in escapes:
                yield _finding(PAST_RULESET, msg, [_node_ev(node)], at, f"past\0{msg}")
            continue
        known = approved.executable(path)
        ev = [_node_ev(use.node)]
        if known is None:
            ident = found[path]
            via = sorted(r for r in use.reached if r.startswith("project file"))
            high = unowned_high and (not ident.owned or bool(via))
            how = f"; reached from {via[0]}" if via else ""
            msg = f"ran {path} ({ident.vouched}{how}), which its card does not list"
            yield _finding(NEW_EXEC, msg, ev, at, f"exec\0{path}", Severity.HIGH if high else None)
            continue
        now = found[path].sha256
        if known.sha256 and now and now != known.sha256:
            msg = (
                f"{path} is no longer the file that was approved: {short(known.sha256)} "
                f"approved, {short(now)} now ({found[path].vouched})"
            )
            yield _finding(NEW_IDENTITY, msg, ev, at, f"identity\0{path}")
        for sh, (node, _img) in sorted(use.shapes.items()):
            if sh not in known.shapes:
                msg = f"{path} {sh or '(no subcommand)'}: a shape its card does not list"
                yield _finding(NEW_SHAPE, msg, [_node_ev(node)], at, f"shape\0{path}\0{sh}")


def _past_ruleset(use: Use) -> list[tuple[str, Node]]:
    """The loader run as a program or a memfd among a use's images: (MCS411's message,
    its process), each message once."""
    out: dict[str, Node] = {}
    for node, img in [(use.node, use.image), *use.shapes.values()]:
        msg = past_ruleset_message(img)
        if msg is not None:
            out.setdefault(msg, node)
    return list(out.items())


def _cwd_departures(seen: Seen, approved: Boundary, at: _Where) -> Iterator[Finding]:
    """NEW_CWD: a working directory outside the approved roots."""
    for cwd, (node, _img) in sorted(seen.cwds.items()):
        if not any(under(cwd, r) for r in approved.cwd_roots):
            msg = f"ran in {cwd}, outside its approved cwd roots"
            yield _finding(NEW_CWD, msg, [_node_ev(node)], at, f"cwd\0{cwd}")


def _dest_departures(seen: Seen, approved: Boundary, at: _Where) -> Iterator[Finding]:
    """NEW_DEST: a destination reached or a port listened on that the card does not list
    (high when it lists none: the tool was approved as local)."""
    local = not approved.destinations and not approved.listens
    keys = {d: name_key(d) for d in (*approved.listens, *approved.destinations)}
    for dest, (node, where) in sorted({**seen.destinations, **seen.listens}.items()):
        listen = dest in seen.listens
        listed = approved.listens if listen else approved.destinations
        if dest in listed or name_key(dest) in {keys[d] for d in listed}:
            continue
        what = f"listened on {dest}" if listen else f"connected to {dest}"
        ev = [Evidence(where or node.images[0].where, f"{evidence_line(node.current)}: {what}")]
        msg = f"{node.current.command} (pid {node.pid}) {what}, which its card does not list"
        yield _finding(NEW_DEST, msg, ev, at, f"dest\0{dest}", Severity.HIGH if local else None)
    # an attempt that reached nothing still tried a place the approval never saw: low
    for tried, (node, where) in sorted(seen.tried.items()):
        dest, _sep, outcome = tried.partition(": ")
        if dest in approved.destinations or dest in seen.destinations:
            continue
        what = f"tried {dest} ({outcome}; nothing was reached)"
        ev = [Evidence(where or node.images[0].where, f"{evidence_line(node.current)}: {what}")]
        msg = f"{node.current.command} (pid {node.pid}) {what}, which its card does not list"
        yield _finding(NEW_DEST, msg, ev, at, f"tried\0{dest}", Severity.LOW)


def _cred_departures(seen: Seen, approved: Boundary, at: _Where) -> Iterator[Finding]:
    """NEW_CRED: a credential-like variable held that the card does not list."""
    for name, node in sorted(seen.creds.items()):
        if name not in approved.credential_env:
            msg = f"{node.current.command} (pid {node.pid}) held {name}, not in its card"
            yield _finding(NEW_CRED, msg, [_node_ev(node)], at, f"cred\0{name}")


def _outlived_departures(seen: Seen, approved: Boundary, at: _Where) -> Iterator[Finding]:
    """OUTLIVED: processes that outlived the call where the card said none would."""
    if not seen.outlived or approved.outlives:
        return
    ev = [Evidence(w, f"{evidence_line(n.current)}: {t}") for n, w, t in seen.outlived[:5]]
    names = ", ".join(f"{n.current.command} (pid {n.pid})" for n, _w, _t in seen.outlived[:5])
    msg = f"{len(seen.outlived)} process(es) outlived the call: {names}"
    yield _finding(OUTLIVED, msg, ev, at, "outlived")


_NO_SCHEMA = (
    "(the description is the same: the schemas or annotations changed; this lock keeps no "
    "approved schema to compare: `mcpshim approve --update` records one)"
)


def _drift(
    approved: ToolApproval,
    row: Mapping[str, object],
    now: Mapping[str, object],
    where: str,
    refused: list[Evidence],
    at: _Where,
) -> Finding:
    """A listed tool whose definition hash is not the approved one: what changed, graded
    info when only the order of the same words and items did (one order hash)."""
    name, sha = approved.name, str(row.get("sha256", ""))
    reordered = bool(approved.order_sha256) and row.get("order_sha256") == approved.order_sha256
    if approved.definition or approved.order_sha256:
        was = parse_lock_definition(approved.definition, name, approved.description)
        got = drift(was, now)
        lines, added = [escape(x) for x in got.lines], got.added
    else:  # a lock written before definitions were kept: its description alone
        lines, added = _diff(approved.description, str(now.get("description", ""))), ()
        lines = lines or [_NO_SCHEMA]
    hashes = f"{short(approved.sha256)} approved, {short(sha)} now"
    if reordered:
        msg = (
            f"tool {name!r} listed its definition in another order, the same words and items "
            f"as approved ({hashes}): not a change of what it says"
        )
    else:
        more = f"; it adds {', '.join(added[:4])}" if added else ""
        msg = f"tool {name!r} changed since it was approved: {hashes}{escape(more)}"
    data = {"tool": name, "approved": approved.sha256, "now": sha, "reordered": reordered,
            "added": list(added)}  # fmt: skip
    ev = Evidence(where, "\n".join(lines), data)
    severity = Severity.INFO if reordered else None
    return _finding(DRIFT, msg, [ev, *refused], at, f"drift\0{name}\0{sha}", severity)


def listed_ev(where: str, name: str, desc: str) -> Evidence:
    return Evidence(where, escape(f"listed: {name}: {desc}"[:300]))


def _contract(att: Attribution, ev: SessionEvidence, server: ServerApproval) -> list[Finding]:
    """The server's side of the approval, rule by rule: its tools, contract and listings."""
    at = _Where(f"session {att.session} server {server.name}", "")
    return [
        *_tool_departures(ev, server, at),
        *_gone_tools(ev, server, at),
        *_server_changed(ev, server, at),
        *_listings_changed(ev, server, at),
    ]


def _tool_departures(ev: SessionEvidence, server: ServerApproval, at: _Where) -> Iterator[Finding]:
    """NEW_TOOL and DRIFT: a listed tool the lock lacks, one whose definition changed (with
    the calls the gate refused for it)."""
    refused: dict[str, list[Evidence]] = {}
    for d, where in ev.refused:
        text = f"refused tools/call {d.get('tool')} (id {d.get('id')}): {d.get('reason')}"
        refused.setdefault(str(d.get("tool")), []).append(Evidence(where, escape(text)))
    for listing, where in zip(ev.listings, ev.listing_where, strict=True):
        for name, row in sorted(listing.items()):
            sha = str(row.get("sha256", ""))
            approved = server.tools.get(name)
            shown = row.get("definition")
            if approved is None:
                desc = str(shown.get("description", "")) if isinstance(shown, dict) else ""
                ev_new = [listed_ev(where, name, desc), *refused.get(name, [])]
                msg = f"tool {name!r} is not in the lock ({short(sha)})"
                yield _finding(NEW_TOOL, msg, ev_new, at, f"new\0{name}")
            elif approved.sha256 != sha:
                now = shown if isinstance(shown, dict) else {"name": name}
                yield _drift(approved, row, now, where, refused.get(name, []), at)


def _gone_tools(ev: SessionEvidence, server: ServerApproval, at: _Where) -> Iterator[Finding]:
    """GONE_TOOL: an approved tool the session's listings did not hold."""
    if not ev.listings:
        return
    last = [Evidence(ev.listing_where[-1], "the last tools/list of the session")]
    for name in sorted(set(server.tools) - set(ev.tools)):
        yield _finding(
            GONE_TOOL, f"approved tool {name!r} was not listed", last, at, f"gone\0{name}"
        )


def _server_changed(ev: SessionEvidence, server: ServerApproval, at: _Where) -> Iterator[Finding]:
    """SERVER_CHANGED: version, protocol, instructions or capabilities not as approved
    (high when the instructions' text changed)."""
    init = ev.initialize
    if init is None or not server.server_sha256:
        return
    changed = [
        f"{label} {old or '?'} -> {new or '?'}"
        for label, old, new in (
            ("version", server.server_version, str(init.get("server_version", ""))),
            ("protocol", server.protocol_version, str(init.get("protocol_version", ""))),
        )
        if old != new
    ]
    text = str(init.get("instructions", ""))
    if str(init.get("server_sha256", "")) != server.server_sha256:
        changed.append(
            ("instructions" if text != server.instructions else "capabilities") + " changed"
        )
    if not changed:
        return
    diff = _diff(server.instructions, text)
    evidence = [Evidence(ev.init_where, "\n".join(diff) or "; ".join(changed))]
    msg = f"server {server.name}: " + "; ".join(changed)
    key = "server\0" + "\0".join(changed)
    yield _finding(SERVER_CHANGED, msg, evidence, at, key, Severity.HIGH if diff else None)


def _listings_changed(ev: SessionEvidence, server: ServerApproval, at: _Where) -> Iterator[Finding]:
    """LISTING_CHANGED: a resource or prompt new or changed since it was approved."""
    for kind, now, was in (
        ("resource", ev.resources, server.resources),
        ("prompt", ev.prompts, server.prompts),
    ):
        for name, sha in sorted(now.items()):
            if was.get(name) != sha:
                state = "new" if name not in was else "changed"
                msg = f"{kind} {name!r} is {state} ({short(sha)})"
                yield _finding(LISTING_CHANGED, msg, [], at, f"{kind}\0{name}\0{sha}")


def _terminated(att: Attribution, ev: SessionEvidence) -> list[Finding]:
    """MCS537 under the call whose process departed (as plain review files it: the same
    finding, session_rules.terminated_finding, placed by the attribution here)."""
    out = []
    for d, where in ev.departures:
        pid, start = d.get("pid"), d.get("start")
        owner = att.owner_of(str(d.get("boot_id")), pid, start) if isinstance(pid, int) else None
        server = att.server
        if server is not None and (server.pid, server.start) == (pid, start):
            call = call_in_flight(att, d.get("time"))
            owner = call.index if call is not None else None
        at = _where(att, owner)
        found = terminated_finding(att.session, d, where)
        out.append(replace(found, group=at.group, key=f"{at.tool}\0{found.key}"))
    return out


def departures(
    att: Attribution,
    ev: SessionEvidence,
    server: ServerApproval | None,
    identities: Identities,
    lock_source: str = "",
) -> list[Finding]:
    """Every departure of one relayed session from its server's approval."""
    if server is None:
        told = (ev.initialize or {}).get("server_name", "?")
        start = att.start or {}
        return [
            Finding(
                NEW_SERVER,
                f"session {att.session}: server {escape(str(start.get('name') or told))} is "
                f"not in the lock {lock_source}".rstrip(),
                (),
                f"session {att.session}",
                key=str(told),
            )
        ]
    out = _contract(att, ev, server) + _terminated(att, ev)

    def place(owner: Owner) -> tuple[str, str]:
        at = _where(att, owner)
        return at.group, at.tool

    out += blocked_departures(att, ev.blocked, place)  # what a contained session refused
    for owner, seen in seen_by_owner(att, ev).items():
        at = _where(att, owner)
        out += _boundary(seen, _union(tool_of(att, owner), server), at, identities)
        if seen.server is not None and server.program is not None:
            program = Boundary((server.program,))
            own = Seen(uses={seen.server.path: seen.server})
            out += _boundary(own, program, _Where(at.group, "server"), identities, False)
    return out


def _where(att: Attribution, owner: Owner) -> _Where:
    if owner is None:
        return _Where(f"session {att.session} outside tool calls", "")
    if isinstance(owner, int):
        call = att.calls[owner]
        return _Where(call_group(att, call), f"{call.method} {call.name}")
    names = sorted(att.calls[i].name for i in owner)
    return _Where(f"session {att.session} overlapping tool calls", "\0".join(names))


def by_tool(findings: Iterable[Finding]) -> Mapping[str, int]:
    """How many departures each tool call heading has (for summaries)."""
    out: dict[str, int] = {}
    for f in findings:
        out[f.group] = out.get(f.group, 0) + 1
    return out
