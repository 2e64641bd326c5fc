"""Approval cards: per tool, in plain words, what approving it means, built from evidence.

"Allow run_test?" teaches people to approve vague actions. A card names consequences
instead: which executables the tool ran (absolute path, content hash, who vouches for it,
how it was reached), their subcommands, the working directories, the user, where it
connected, which credential-like variables its processes held, and whether it left
processes running after it answered; and it says plainly when the tool runs scripts from a
project file, which whoever can edit the checkout chooses. A tool the session listed but
never called is "definition only": anything it runs later is a departure.

`server_card` builds the cards of one relayed session; `ServerCard.approval` is what
`mcpshim approve` writes into the lock (contract.lockfile).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from mcpshim.contract.drift import drift, lock_definition, parse_lock_definition
from mcpshim.contract.identity import Identities, Identity
from mcpshim.contract.lockfile import (
    Boundary,
    Executable,
    ServerApproval,
    ToolApproval,
)
from mcpshim.contract.lockmerge import reordered, roots
from mcpshim.family.attribution import Attribution
from mcpshim.review.boundary import Seen, SessionEvidence, seen_by_tool

__all__ = ["ServerCard", "ToolCard", "boundary_of", "default_name", "server_card", "with_drift"]


@dataclass(frozen=True)
class ToolCard:
    approval: ToolApproval
    calls: int
    seen: Seen
    identities: Mapping[str, Identity]
    definition: Mapping[str, Any] = field(default_factory=dict)  # as recorded (redacted)
    listed: bool = True  # False: called, but no tools/list of this session showed it
    drift: tuple[str, ...] = ()  # how it differs from the lock's approval (contract.drift)

    @property
    def name(self) -> str:
        return self.approval.name


@dataclass(frozen=True)
class ServerCard:
    approval: ServerApproval
    tools: tuple[ToolCard, ...]
    outside: Seen  # what the server ran outside tool calls (itself, start-up, other requests)
    identities: Mapping[str, Identity]
    session: str
    listed: bool  # a tools/list result was recorded


def boundary_of(seen: Seen, ids: Mapping[str, Identity]) -> Boundary:
    execs = tuple(
        Executable(
            path,
            ids[path].sha256 if path in ids else "",
            ids[path].vouched if path in ids else "",
            tuple(sorted(use.reached)),
            tuple(sorted(use.shapes)),
        )
        for path, use in sorted(seen.uses.items())
    )
    return Boundary(
        execs,
        roots(seen.cwds),
        tuple(sorted(seen.destinations)),
        tuple(sorted(seen.listens)),
        tuple(sorted(seen.creds)),
        tuple(sorted(seen.users)),
        bool(seen.outlived),
        tuple(sorted(seen.files.credentials)),
        tuple(sorted(seen.files.persistence)),
        tuple(sorted(seen.files.ran_written)),
    )


def _program(outside: Seen, identities: Identities) -> Executable | None:
    use = outside.server
    if use is None:
        return None
    ident = identities.get(use.path)
    return Executable(
        use.path, ident.sha256, ident.vouched, tuple(sorted(use.reached)), tuple(use.shapes)
    )


def default_name(att: Attribution, ev: SessionEvidence) -> str:
    """The name a server is approved under: `run --name`, else the name it gave itself in
    initialize, else its command's base name."""
    start = att.start or {}
    name = start.get("name")
    if isinstance(name, str) and name:
        return name
    told = (ev.initialize or {}).get("server_name")
    if isinstance(told, str) and told:
        return told
    command = start.get("command") or ["server"]
    return str(command[-1]).rsplit("/", 1)[-1] or "server"


def server_card(
    att: Attribution, ev: SessionEvidence, identities: Identities, name: str = ""
) -> ServerCard:
    """The cards of one session: every tool it listed (called or not) and every tool it
    called, with the server's own boundary outside tool calls."""
    seen = seen_by_tool(att, ev)
    ids = identities.lookup(p for s in seen.values() for p in s.uses)
    calls: dict[str, int] = {}
    for c in att.calls:
        if c.method == "tools/call":
            calls[c.name] = calls.get(c.name, 0) + 1
    listed = ev.tools
    cards = []
    for tool in sorted(set(listed) | set(calls)):
        row = listed.get(tool, {})
        definition = row.get("definition") if isinstance(row.get("definition"), dict) else {}
        desc = definition.get("description") if isinstance(definition, dict) else None
        s = seen.get(tool, Seen())
        tool_approval = ToolApproval(
            tool,
            str(row.get("sha256", "")),
            desc if isinstance(desc, str) else "",
            tool in calls,
            boundary_of(s, ids),
            str(row.get("order_sha256", "")),
            lock_definition(definition) if isinstance(definition, dict) else "",
        )
        cards.append(
            ToolCard(tool_approval, calls.get(tool, 0), s, ids, definition or {}, tool in listed)
        )
    init = ev.initialize or {}
    start = att.start or {}
    outside = seen.get(None, Seen())
    approval = ServerApproval(
        name or default_name(att, ev),
        tuple(str(a) for a in start.get("command", ())),
        str(init.get("server_name", "")),
        str(init.get("server_version", "")),
        str(init.get("protocol_version", "")),
        str(init.get("server_sha256", "")),
        str(init.get("instructions", "")),
        att.session,
        datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        _program(outside, identities),
        boundary_of(outside, ids),
        {c.name: c.approval for c in cards},
        dict(ev.resources),
        dict(ev.prompts),
    )
    return ServerCard(approval, tuple(cards), outside, ids, att.session, bool(ev.listings))


_REORDERED = "only the order of the same words and items changed: the approved one stays"


def with_drift(card: ServerCard, approved: ServerApproval | None) -> ServerCard:
    """The cards, each tool whose definition departs from `approved` (the lock's entry)
    showing how (contract.drift), so whoever approves again reads the change first."""
    if approved is None:
        return card
    tools = []
    for t in card.tools:
        was = approved.tools.get(t.name)
        if was is None or not t.approval.sha256 or was.sha256 == t.approval.sha256:
            tools.append(t)
            continue
        if reordered(was, t.approval):
            lines: tuple[str, ...] = (_REORDERED,)
        else:
            old = parse_lock_definition(was.definition, was.name, was.description)
            now = dict(t.definition or {"name": t.name})
            if not was.definition and not was.order_sha256:  # an older lock: its text alone
                now = {k: v for k, v in now.items() if k in ("name", "description")}
            lines = drift(old, now).lines or ("(the schemas or annotations changed)",)
        tools.append(replace(t, drift=lines))
    return replace(card, tools=tuple(tools))
