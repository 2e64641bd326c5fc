"""From the log to traces: the review pipeline's one pass (review.pipeline.review_records,
as `mcpshim report` uses it) gives the findings and attributions; each finding becomes an
`mcpshim.finding` event on the span it is about: the exec its evidence names, else the tool
call it was filed under, else the session. A finding about a file (a credential read, a
place that runs later written, a written file run: review.rules.file_rules) adds an
`mcpshim.file` event beside it, at the fact's own time, with `file.path`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from mcpshim import __version__
from mcpshim.family.attribution import Anchor, Attribution
from mcpshim.family.images import parse_time
from mcpshim.log.execlog import EventRecord, Record
from mcpshim.otel.model import (
    SessionTrace,
    SpanEvent,
    call_span_id,
    execs_of,
    process_span_id,
    root_span_id,
    session_trace,
)
from mcpshim.review.findings import Finding, finding_json
from mcpshim.review.pipeline import review_records
from mcpshim.review.policy import Policy
from mcpshim.review.rules.mcp_rules import SESSION_WIDE, call_ref
from mcpshim.shim.manifest import Manifest

__all__ = ["FILE_EVENT", "FINDING_EVENT", "collect_traces", "resource_of", "trace_for"]

FINDING_EVENT = "mcpshim.finding"
FILE_EVENT = "mcpshim.file"


def resource_of(att: Attribution, events: Iterable[EventRecord], host: str) -> dict[str, Any]:
    """Who the spans are about: the host, the server (as it named itself at initialize, else
    the session's name or command) and mcpshim's version."""
    init = next((e.data for e in events if e.kind == "mcp-initialize"), {})
    st = att.start or {}
    command = [str(a) for a in st.get("command", [])]
    name = (
        init.get("server_name")
        or st.get("name")
        or (os.path.basename(command[0]) if command else "")
    )
    out = {
        "service.name": name or "mcp-server",
        "service.version": init.get("server_version") or None,
        "service.instance.id": att.session,
        "host.name": host,
        "mcpshim.version": __version__,
    }
    return {k: v for k, v in out.items() if v is not None}


def _session_start(att: Attribution) -> datetime | None:
    t = parse_time((att.start or {}).get("time"))
    return t or min((c.request for c in att.calls), default=None)


# a finding's fields (review.findings.finding_json) as event attributes
_ATTRIBUTES = {"rule": "rule.id", "name": "rule.name", "severity": "severity",
               "confidence": "confidence", "message": "message",
               "fingerprint": "fingerprint"}  # fmt: skip


def _attrs(f: Finding) -> dict[str, Any]:
    """A finding's event attributes (without evidence)."""
    head = finding_json(f, evidence=False)
    return {f"mcpshim.finding.{name}": head[key] for key, name in _ATTRIBUTES.items()}


class _Index:
    """Where a finding goes, over every session exported: span ids and their start times."""

    def __init__(self, atts: Iterable[Attribution]) -> None:
        self.process: dict[tuple[str, int, Any], tuple[str, int, datetime | None]] = {}
        self.where: dict[str, tuple[str, int, datetime | None]] = {}  # an exec's record
        self.call: dict[Any, tuple[str, int, datetime]] = {}
        self.root: dict[str, datetime | None] = {}
        for att in atts:
            sid = att.session
            self.root[sid] = _session_start(att)
            for node in att.nodes():
                for k, img in enumerate(execs_of(node)):
                    span = (sid, process_span_id(sid, node, k), img.time or node.first_time)
                    self.process.setdefault((node.boot_id, node.pid, node.start), span)
                    self.where[img.where] = span
            for call in att.calls:
                self.call[call_ref(att, call)] = (sid, call_span_id(sid, call), call.request)

    def file(
        self, findings: Iterable[Finding], only: str | None
    ) -> dict[str, dict[int, list[SpanEvent]]]:
        """`only`: the one session review read (then a finding that names none is its)."""
        out: dict[str, dict[int, list[SpanEvent]]] = {}
        for f in findings:
            attrs: dict[str, Any] | None = None  # shared by the finding's events
            for ev in () if f.rule.id in SESSION_WIDE else f.evidence:
                d = ev.data
                start = d["start_ticks"] if "start_ticks" in d else d.get("start")
                hit = self.where.get(ev.where) or self.process.get(
                    (str(d.get("boot_id")), _int(d.get("pid")), start)
                )
                if hit is not None:
                    sid, span, t = hit
                    when = t or self.root[sid]
                    if when is not None:  # the span is the evidence: no text repeats it
                        attrs = attrs or _attrs(f)
                        event = SpanEvent(FINDING_EVENT, when, attrs)
                        out.setdefault(sid, {}).setdefault(span, []).append(event)
                        if "file" in d:  # the file the finding is about, at its own time
                            out[sid][span].append(_file_event(f, d, when))
            if attrs is not None:
                continue
            call = self.call.get(f.call) if f.call is not None else None
            if call is not None:
                sid, span, t = call
                event = SpanEvent(FINDING_EVENT, t, _attrs(f))
                out.setdefault(sid, {}).setdefault(span, []).append(event)
                continue
            sid_hit = next((s for s in self.root if f.group.startswith(f"session {s}")), only)
            when = self.root.get(sid_hit) if sid_hit is not None else None
            if sid_hit is not None and when is not None:
                attrs = _attrs(f)
                if f.evidence and f.evidence[0].text:
                    attrs["mcpshim.finding.evidence"] = f.evidence[0].text
                out.setdefault(sid_hit, {}).setdefault(root_span_id(sid_hit), []).append(
                    SpanEvent(FINDING_EVENT, when, attrs)
                )
        return out


def _file_event(f: Finding, d: Mapping[str, Any], when: datetime) -> SpanEvent:
    at = parse_time(d.get("at")) or when
    attrs = {"file.path": str(d["file"]), "mcpshim.file.change": str(d.get("change") or ""),
             "mcpshim.finding.rule.id": f.rule.id}  # fmt: skip
    for key in ("credential", "persistence"):
        if d.get(key):
            attrs[f"mcpshim.file.{key}"] = str(d[key])
    return SpanEvent(FILE_EVENT, at, attrs)


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else -1


def trace_for(
    att: Attribution,
    events: Iterable[EventRecord],
    host: str,
    filed: Mapping[int, list[SpanEvent]] | None = None,
) -> SessionTrace:
    events = list(events)
    findings = {span: tuple(evs) for span, evs in (filed or {}).items()}
    return session_trace(att, events, resource_of(att, events, host), findings)


def collect_traces(
    records: Iterable[Record],
    *,
    policy: Policy,
    anchor: Anchor,
    host: str,
    session: str | None = None,
    since: datetime | None = None,
    shim_dir: str | None = None,
    manifest: Manifest | None = None,
) -> list[SessionTrace]:
    """The relayed sessions of the log (one, or those started at or after `since`) as traces,
    their review findings (review.pipeline) filed as span events."""
    done, collector = review_records(records, policy=policy, anchor=anchor, session=session,
                                     shim_dir=shim_dir, manifest=manifest)  # fmt: skip
    atts = done.attributions
    if since is not None:
        atts = [a for a in atts if (t := _session_start(a)) is not None and t >= since]
    if not atts:
        return []
    filed = _Index(atts).file(done.findings, session)
    return [
        trace_for(att, collector.sessions[att.session].events, host, filed.get(att.session))
        for att in atts
    ]
