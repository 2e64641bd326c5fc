"""One relayed session as trace data: spans with ids, times and attributes, no SDK object.

The shape: the session is the root span; each relayed call (tools/call, resources/read,
prompts/get) is a SERVER span under it; each process a call started is a span under the
call, its descendants under it; the server itself and what no call started hang under the
session, and so does a process overlapping calls could each have started: each of those
calls' spans links to it (a link, not a parent: which one started it is not known). Names
and attributes follow the OpenTelemetry semantic conventions: GenAI tool execution
(`execute_tool {gen_ai.tool.name}`), MCP (`mcp.method.name`, `mcp.session.id`,
`mcp.protocol.version`, `jsonrpc.request.id`), process (`process.pid`,
`process.command_args` redacted, ...), network (`network.peer.address`,
`network.transport`, ... on each exec's span and its `mcpshim.network` events:
otel.netattrs); what no convention names is under `mcpshim.`.

Ids are hashes of identity, never random: the trace id of the session id, a call's span id
of its direction, JSON-RPC id and request time, a process's of (boot id, pid, start ticks),
so exporting a session twice, or streaming it live and exporting it later, gives the same
ids. Times are the records' own (the relay's clock for calls, the shim's for processes).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from mcpshim.base.display import json_text
from mcpshim.family.attribution import Attribution, Call
from mcpshim.family.images import parse_time
from mcpshim.family.netfacts import kind_of
from mcpshim.family.tree import Image, Node
from mcpshim.family.view import argv_of
from mcpshim.log.execlog import EventRecord
from mcpshim.log.logview import entity_id
from mcpshim.log.redact import redact_argv
from mcpshim.otel.netattrs import net_attributes, net_event_attributes

__all__ = [
    "SessionTrace",
    "SpanData",
    "SpanEvent",
    "SpanLink",
    "call_span_id",
    "exec_span_at",
    "execs_of",
    "process_span_id",
    "root_span_id",
    "session_trace",
    "trace_id_of",
]

SERVER, INTERNAL = "server", "internal"
Attrs = dict[str, Any]


@dataclass(frozen=True)
class SpanEvent:
    name: str
    time: datetime
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SpanLink:
    """A link to another span of the trace: a call's to each process it may have started."""

    span_id: int
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SpanData:
    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    kind: str  # SERVER or INTERNAL
    start: datetime
    end: datetime
    attributes: Mapping[str, Any]
    events: tuple[SpanEvent, ...] = ()
    error: str | None = None  # the status description when the span's status is ERROR
    links: tuple[SpanLink, ...] = ()


@dataclass(frozen=True)
class SessionTrace:
    session: str
    resource: Mapping[str, Any]
    spans: tuple[SpanData, ...]


def _hash(*parts: str, size: int) -> int:
    digest = hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:size], "big") or 1  # 0 is the invalid id


def trace_id_of(session: str) -> int:
    return _hash("mcpshim.trace", session, size=16)


def root_span_id(session: str) -> int:
    return _hash("mcpshim.session", session, size=8)


def call_span_id(session: str, call: Call) -> int:
    return _hash(
        "mcpshim.call", session, repr(call.id), call.method, call.request.isoformat(), size=8
    )


def process_span_id(session: str, node: Node, k: int = 0) -> int:
    """The span of a process's exec number k (its first: the process's own id, as before
    execs had spans of their own)."""
    when = node.first_time.isoformat() if node.start is None and node.first_time else ""
    parts = ("mcpshim.process", session, node.boot_id, str(node.pid), str(node.start), when)
    return _hash(*parts, *((str(k),) if k else ()), size=8)


def execs_of(node: Node) -> list[Image]:
    """A process's execs (the model's entries), each a span; a process with none (it
    only forked, or only failed) is one span of its first image."""
    return [i for i in node.images if i.entry] or node.images[:1]


def exec_span_at(session: str, node: Node, t: datetime | None) -> int:
    """The span of the exec a process was running at time t (what a child forked from)."""
    execs = execs_of(node)
    k = 0
    for i, img in enumerate(execs):
        if t is not None and img.time is not None and img.time <= t:
            k = i
    return process_span_id(session, node, k)


def _clean(attrs: Attrs) -> Attrs:
    """What OTLP can carry: no None, lists of one type."""
    return {k: v for k, v in attrs.items() if v is not None and v != []}


def call_span(att: Attribution, call: Call, common: Attrs, end: datetime) -> SpanData:
    """A relayed call: its times are the relay's, when it passed the request and response on."""
    rid = str(call.id) if call.id is not None else None
    attrs: Attrs = {"mcp.method.name": call.method, "jsonrpc.request.id": rid, **common}
    name = call.method
    if call.method == "tools/call":
        name = f"execute_tool {call.name}"
        attrs.update({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                      "gen_ai.tool.call.id": rid})  # fmt: skip
    elif call.method == "prompts/get":
        name = f"prompts/get {call.name}"
        attrs["gen_ai.prompt.name"] = call.name
    elif call.method == "resources/read":
        attrs["mcp.resource.uri"] = call.name
    error = None
    if call.error_code is not None:
        attrs["error.type"] = attrs["rpc.response.status_code"] = str(call.error_code)
        error = f"JSON-RPC error {call.error_code}"
    elif call.is_error:
        attrs["error.type"] = "tool_error"
        error = "the tool answered isError: true"
    if call.response is None:
        attrs["mcpshim.call.answered"] = False
    may = att.may_have_run(call.index)
    if may:  # it overlapped calls whose processes could not be told apart: links, below
        attrs["mcpshim.call.may_have_run"] = [m.text() for m in may]
    return SpanData(
        trace_id_of(att.session),
        call_span_id(att.session, call),
        root_span_id(att.session),
        name,
        SERVER,
        call.request,
        max(call.response or end, call.request),
        _clean(attrs),
        error=error,
    )


@dataclass
class _Ends:
    """What the session's records say about when its processes ended."""

    reaped: dict[tuple[int, int | None], tuple[datetime, Any]] = field(default_factory=dict)
    survivors: set[tuple[int, int | None]] = field(default_factory=set)
    alive: dict[tuple[int, int | None], datetime] = field(default_factory=dict)


def _ends(att: Attribution, events: Iterable[EventRecord]) -> _Ends:
    out = _Ends()
    for ev in events:
        pid, t = ev.data.get("pid"), parse_time(ev.data.get("time"))
        if not isinstance(pid, int) or t is None:
            continue
        ident = (pid, ev.data.get("start"))
        if ev.kind == "reaped":
            out.reaped[ident] = (t, ev.data.get("status"))
        elif ev.kind == "survivor":
            out.survivors.add(ident)
    for call in att.calls:
        if call.alive_time is not None:
            for ident in call.alive:
                if ident not in out.alive or out.alive[ident] < call.alive_time:
                    out.alive[ident] = call.alive_time
    return out


@lru_cache(maxsize=65_536)
def _argv_text(argv: tuple[bytes, ...]) -> tuple[str, ...]:
    """An argv as span text, redacted (again: the log holds it redacted already); sessions
    repeat their command lines, so each is redacted once."""
    return tuple(json_text(a) for a in redact_argv(list(argv)).argv)


def _process_attrs(node: Node, first: Image, exit_code: Any) -> Attrs:
    argv = list(_argv_text(tuple(argv_of(first))))
    target = json_text(first.target)
    attrs: Attrs = {
        "process.pid": node.pid,
        "process.parent_pid": first.ppid,
        "process.executable.path": target or None,
        "process.executable.name": os.path.basename(target) or None,
        "process.command_args": argv,
        "process.args_count": len(argv),
        "process.working_directory": None if first.cwd_unknown else json_text(first.cwd),
        "process.exit.code": exit_code if isinstance(exit_code, int) else None,
        "mcpshim.process.entity_id": entity_id(node.boot_id, node.pid, node.start),
        "mcpshim.process.sources": list(node.sources),
        "mcpshim.process.source": first.source,
    }
    execs = execs_of(node)
    if len(execs) > 1:
        attrs["mcpshim.process.images"] = [i.command for i in execs]
    return attrs


def _process_spans(
    att: Attribution,
    node: Node,
    parent: int,
    ends: _Ends,
    span: tuple[datetime, datetime],
    filed: Mapping[int, tuple[SpanEvent, ...]],
) -> list[SpanData]:
    """A process's execs, a span each: the first under `parent`, each later one under the
    one it replaced; the last ends when the process did."""
    out: list[SpanData] = []
    trace = trace_id_of(att.session)
    execs = execs_of(node)
    whole = _process_span(att, node, ends, span)
    nets: dict[int, list[Any]] = {}
    for _node, made, n in att.net.facts([node]):
        nets.setdefault(id(made), []).append(n)
    up = parent
    for k, img in enumerate(execs):
        sid = process_span_id(att.session, node, k)
        first = img.time or whole.start if k else whole.start
        nxt = execs[k + 1].time if k + 1 < len(execs) else None
        last = max(nxt or whole.end, first)
        attrs = dict(whole.attributes) | _clean(_process_attrs(node, img, None))
        if k + 1 < len(execs):
            attrs.pop("process.exit.code", None)
        elif "process.exit.code" in whole.attributes:
            attrs["process.exit.code"] = whole.attributes["process.exit.code"]
        attrs["mcpshim.process.exec"] = img.entry  # false: it only forked (or only failed)
        facts = nets.get(id(img), [])
        attrs |= _clean(dict(net_attributes(facts)))
        net_events = tuple(SpanEvent("mcpshim.network", n.time, _clean(net_event_attributes(n)))
                           for n in facts if kind_of(n) not in ("plumbing", "other"))  # fmt: skip
        out.append(replace(whole, trace_id=trace, span_id=sid, parent_id=up,
                           name=img.command or _forked(node), start=first, end=last,
                           attributes=attrs, events=filed.get(sid, ()) + net_events))  # fmt: skip
        up = sid
    return out


def _forked(node: Node) -> str:
    """A process that never exec'd runs its parent's program: named by it."""
    p = node.parent
    return f"{p.current.command} (fork)" if p is not None and p.images else "(fork)"


def _process_span(
    att: Attribution, node: Node, ends: _Ends, span: tuple[datetime, datetime]
) -> SpanData:
    """A process: from its first record to its exit when a record says (reaped, the
    server's session-end, a survivor at the end), else to the last record that saw it."""
    start, end = span
    ident = (node.pid, node.start)
    first = node.first_time or start
    exit_code: Any = None
    if node is att.server:
        last, exit_code = end, (att.end or {}).get("exit_status")
    elif ident in ends.reaped:
        last, exit_code = ends.reaped[ident]
    elif ident in ends.survivors:
        last = end
    else:
        seen = [i.time for i in node.images if i.time is not None]
        if ident in ends.alive:
            seen.append(ends.alive[ident])
        last = max(seen, default=first)
    attrs = _process_attrs(node, node.images[0], exit_code)
    if ident in ends.survivors:
        attrs["mcpshim.process.survived_session"] = True
    if node.id in att.outlived:
        attrs["mcpshim.process.outlived_call"] = att.outlived[node.id][1]
    owner = att.owner.get(node.id)
    if isinstance(owner, tuple):
        attrs["mcpshim.process.candidate_calls"] = [att.calls[i].label for i in owner]
    if node.id in att.reasons:
        attrs["mcpshim.process.call_evidence"] = att.reasons[node.id]
    return SpanData(0, 0, None, "", INTERNAL, first, max(last, first), _clean(attrs))


#: what a call span's link to a process span says: the call may have started it
_CANDIDATE = {"mcpshim.link.relation": "candidate_process"}


def _candidate_links(att: Attribution) -> dict[int, tuple[SpanLink, ...]]:
    """Per call of an overlap group, a link to each process it may have started (the
    process's first span: what that process started hangs below it)."""
    out: dict[int, list[SpanLink]] = {}
    for g in att.overlaps:
        for top in g.tops:
            owner = att.owner.get(top.id)
            link = SpanLink(process_span_id(att.session, top), _CANDIDATE)
            for c in owner if isinstance(owner, tuple) else ():
                out.setdefault(c, []).append(link)
    return {c: tuple(links) for c, links in out.items()}


def session_trace(
    att: Attribution,
    events: Iterable[EventRecord],
    resource: Mapping[str, Any],
    findings: Mapping[int, tuple[SpanEvent, ...]] | None = None,
) -> SessionTrace:
    """The spans of one session; `findings` maps a span id to the events filed on it."""
    events = list(events)
    filed = findings or {}
    nodes = list(att.nodes())
    firsts = [t for n in nodes if (t := n.first_time) is not None]
    init = next((e.data for e in events if e.kind == "mcp-initialize"), {})
    sid = att.session
    times = [t for t in (parse_time((att.start or {}).get("time")),) if t is not None]
    times += [c.request for c in att.calls]
    times += firsts
    start = min(times, default=None)
    if start is None and events:
        start = parse_time(events[0].data.get("time"))
    if start is None:
        raise ValueError(f"session {sid} has no record with a time")
    end_t = parse_time((att.end or {}).get("time"))
    later = [c.response for c in att.calls if c.response] + firsts
    end = end_t or max([start, *later])
    common = _clean({"mcp.session.id": sid, "mcp.protocol.version": init.get("protocol_version"),
                     "network.transport": "pipe"})  # fmt: skip
    spans: list[SpanData] = []
    trace = trace_id_of(sid)
    root = root_span_id(sid)
    st = att.start or {}
    root_attrs: Attrs = {
        **common,
        "mcpshim.session.name": st.get("name") or None,
        "process.command_args": [str(a) for a in st.get("command", [])],
        "process.working_directory": st.get("cwd"),
        "process.exit.code": (att.end or {}).get("exit_status"),
        "mcpshim.session.survivors": (att.end or {}).get("survivors"),
    }
    spans.append(
        SpanData(
            trace,
            root,
            None,
            f"session {resource.get('service.name', sid)}",
            INTERNAL,
            start,
            max(end, start),
            _clean(root_attrs),
            filed.get(root, ()),
        )
    )
    call_ids = {}
    links = _candidate_links(att)
    for call in att.calls:
        span = call_span(att, call, common, end)
        call_ids[call.index] = span.span_id
        if span.span_id in filed:
            span = replace(span, events=filed[span.span_id])
        if call.index in links:
            span = replace(span, links=links[call.index])
        spans.append(span)
    ends = _ends(att, events)
    for node in nodes:
        up = _parent(att, node, call_ids, root)
        spans += _process_spans(att, node, up, ends, (start, end), filed)
    return SessionTrace(sid, dict(resource), tuple(spans))


def _parent(att: Attribution, node: Node, call_ids: Mapping[int, int], root: int) -> int:
    """A process's parent span: the exec of its parent process it forked from, when that
    shares its call (or it has none), else the call that started it, else the session."""
    owner = att.owner.get(node.id)
    p = node.parent
    if p is not None and p.known and (not isinstance(owner, int) or att.owner.get(p.id) == owner):
        return exec_span_at(att.session, p, node.first_time)
    if isinstance(owner, int):
        return call_ids[owner]
    return root
