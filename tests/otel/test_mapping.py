"""The export's fast paths against plain ones, on benchmarks/otel_export.py's session (N/5
tool calls of five execs, findings on every process): the SDK spans `to_readable` builds (a
resource hashed once, contexts, statuses and attribute maps shared) encode to the same OTLP
bytes as spans built field by field with the SDK's own classes; and every finding review
reports for the session (review, then its tool-call pass, as `mcpshim review` composes them)
is an event on the span it is about, with its rule, severity, text and fingerprint, and
nothing else is."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from mcpshim import __version__
from mcpshim.family.attribution import attribute_log
from mcpshim.log import execlog
from mcpshim.otel.collect import FINDING_EVENT
from mcpshim.otel.model import (
    SERVER,
    SessionTrace,
    call_span_id,
    execs_of,
    process_span_id,
    root_span_id,
)
from mcpshim.otel.sdk import to_readable
from mcpshim.review.engine import review
from mcpshim.review.pipeline import with_calls
from mcpshim.review.policy import default_policy
from mcpshim.review.rules.mcp_rules import SESSION_WIDE, call_ref
from tests.fixtures.otelscenario import bench_traces


def _ns(t: datetime) -> int:
    return (t - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) * 1000


def _plain(trace: SessionTrace) -> list[ReadableSpan]:
    """Each span as the SDK's classes make it, nothing shared."""
    out = []
    for s in trace.spans:
        flags = TraceFlags(TraceFlags.SAMPLED)
        parent = None
        if s.parent_id is not None:
            parent = SpanContext(s.trace_id, s.parent_id, is_remote=False, trace_flags=flags)
        out.append(
            ReadableSpan(
                name=s.name,
                context=SpanContext(s.trace_id, s.span_id, is_remote=False, trace_flags=flags),
                parent=parent,
                resource=Resource(dict(trace.resource)),
                attributes=dict(s.attributes),
                events=[Event(e.name, dict(e.attributes), _ns(e.time)) for e in s.events],
                kind=SpanKind.SERVER if s.kind == SERVER else SpanKind.INTERNAL,
                status=Status(StatusCode.ERROR, s.error) if s.error else Status(StatusCode.UNSET),
                start_time=_ns(s.start),
                end_time=_ns(s.end),
                instrumentation_scope=InstrumentationScope("mcpshim", __version__),
            )
        )
    return out


def test_readable_spans_encode_to_the_bytes_of_plain_sdk_spans(tmp_path: Path) -> None:
    _loc, _sid, [trace] = bench_traces(tmp_path, 500)
    # A call answered with isError, too: a status with a description.
    spans = list(trace.spans)
    spans[1] = replace(spans[1], error="the tool answered isError: true")
    trace = replace(trace, spans=tuple(spans))
    assert sum(len(s.events) for s in trace.spans) > len(trace.spans)
    ours = encode_spans(to_readable(trace)).SerializeToString()
    plain = encode_spans(_plain(trace)).SerializeToString()
    assert ours == plain
    # A part of the trace (the live stream sends calls as they answer): the same too.
    part = [s for s in trace.spans if s.kind == SERVER][:3]
    ids = {s.span_id for s in part}
    plain_part = [p for p in _plain(trace) if p.context.span_id in ids]
    ours = encode_spans(to_readable(trace, part)).SerializeToString()
    assert ours == encode_spans(plain_part).SerializeToString()


def test_every_finding_review_reports_is_an_event_on_its_span(tmp_path: Path) -> None:
    loc, sid, [trace] = bench_traces(tmp_path, 500)
    policy = default_policy()
    found = review(
        execlog.iter_records(loc, []), policy=policy, session=sid, shim_dir=str(loc.shim_dir)
    )
    done = with_calls(found, attribute_log(loc, sid), policy)
    findings, [att] = done.findings, done.attributions
    spans = {(n.boot_id, n.pid, n.start): process_span_id(sid, n) for n in att.nodes()}
    # a finding sits on the span of the exec its evidence is (one span per exec)
    execs = {
        img.where: process_span_id(sid, n, k)
        for n in att.nodes()
        for k, img in enumerate(execs_of(n))
    }
    calls = {call_ref(att, c): call_span_id(sid, c) for c in att.calls}
    want: Counter[tuple[int, str, str, str, str]] = Counter()
    for f in findings:
        what = (f.rule.id, f.level.label, f.text, f.fingerprint)
        named = [] if f.rule.id in SESSION_WIDE else f.evidence
        on = [execs.get(e.where) or spans[k] for e in named if (k := _process(e.data)) in spans]
        if not on and f.call is not None:
            on = [calls[f.call]]
        want.update((span, *what) for span in on or [root_span_id(sid)])
    got: Counter[tuple[int, str, str, str, str]] = Counter()
    for s in trace.spans:
        for e in s.events:
            assert e.name == FINDING_EVENT
            a = e.attributes
            got[(s.span_id, a["mcpshim.finding.rule.id"], a["mcpshim.finding.severity"],
                 a["mcpshim.finding.message"], a["mcpshim.finding.fingerprint"])] += 1  # fmt: skip
    # findings of execs (MCS101) and of a package runner's call (MCS107); run_test's
    # programs are what a test runner runs (no MCS502 since issue 27 defect 11)
    assert {k[1] for k in want} >= {"MCS101", "MCS107"}
    assert got == want


def _process(data: object) -> tuple[str, int, object] | None:
    if not isinstance(data, dict):
        return None
    start = data["start_ticks"] if "start_ticks" in data else data.get("start")
    return (str(data.get("boot_id")), int(data.get("pid") or -1), start)
