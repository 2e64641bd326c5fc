"""The OTLP request bodies mcpshim writes (otel.otlp) are the official encoder's, byte for byte:
for spans of every shape the model makes and values the encoder takes or refuses, and for what
`export otlp` sends a real receiver through the official exporter."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcpshim.cli import cli
from mcpshim.otel import otlp, sdk
from mcpshim.otel.model import INTERNAL, SERVER, SessionTrace, SpanData, SpanEvent, SpanLink
from tests.fixtures.otelscenario import bench_traces
from tests.fixtures.otlp_receiver import receiver
from tests.fixtures.runhelp import poll


def official(trace: SessionTrace, batch: int = sdk.BATCH) -> list[bytes]:
    spans = sdk.to_readable(trace)
    return [
        encode_spans(spans[i : i + batch]).SerializePartialToString()
        for i in range(0, len(spans), batch)
    ]


def ours(trace: SessionTrace, batch: int = sdk.BATCH) -> list[bytes]:
    return [body for _, body in otlp.request_bodies(trace, batch=batch)]


T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)


def _span(i: int, attrs: dict[str, Any], **kw: Any) -> SpanData:
    base: dict[str, Any] = {
        "trace_id": (1 << 127) + 5, "span_id": i + 1, "parent_id": 1 if i else None,
        "name": f"span {i}", "kind": INTERNAL, "start": T0 + timedelta(microseconds=i),
        "end": T0 + timedelta(seconds=i), "attributes": attrs,
    }  # fmt: skip
    return SpanData(**{**base, **kw})


def test_every_value_and_span_shape_encodes_as_the_official_encoder_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    shared = {"mcpshim.finding.rule.id": "MCS107", "mcpshim.finding.severity": "medium"}
    values: dict[str, Any] = {
        "s": "text", "empty": "", "unicode": "é ✓ \U0001f600", "zero": 0, "one": 1,
        "neg": -1, "min": -(1 << 63), "max": (1 << 63) - 1, "big": 1 << 300, "t": True,
        "f": False, "pi": 3.25, "negz": -0.0, "inf": float("inf"), "raw": b"\0\xff",
        "list": ["a", "b"], "ints": [1, -2, 3], "nothing": [], "tuple": ("x",),
        "mixed": ["a", 1, True], "none": None, "nested": [["a"], []], "map": {"k": "v", "n": 2},
        "": "no key", "bad": object(), "lone": "\udc80",
    }  # fmt: skip
    spans = [
        _span(0, {"mcp.session.id": "s1"}),
        _span(1, values, kind=SERVER, error="the tool answered isError: true"),
        _span(
            2,
            {},
            events=(
                SpanEvent("mcpshim.finding", T0, shared),
                SpanEvent("mcpshim.finding", T0 + timedelta(days=400), shared),
                SpanEvent("", T0, {}),
            ),
        ),
        _span(3, {"k": "v"}, name="", start=datetime(1970, 1, 1, tzinfo=timezone.utc)),
        _span(4, shared, events=(SpanEvent("e", T0, shared),), error="JSON-RPC error -32601"),
        # a call's links to the processes it may have started (issue 34), one bare
        _span(
            5,
            {},
            kind=SERVER,
            links=(
                SpanLink(3, {"mcpshim.link.relation": "candidate"}),
                SpanLink(4),
                SpanLink((1 << 64) - 1, values),
            ),
        ),
    ]
    trace = SessionTrace("s1", {"service.name": "srv", "host.name": "h"}, tuple(spans))
    with caplog.at_level(logging.CRITICAL):  # the official encoder logs each value it drops
        for batch in (1, 2, 512):
            assert ours(trace, batch) == official(trace, batch), batch
    assert ours(SessionTrace("s", {}, ())) == official(SessionTrace("s", {}, ())) == []


def test_a_benchmark_session_encodes_as_the_official_encoder_does(tmp_path: Path) -> None:
    _, _, [trace] = bench_traces(tmp_path, 2_000)
    assert len(trace.spans) > 1_000 and any(s.events for s in trace.spans)
    assert ours(trace) == official(trace)


def test_export_sends_a_real_receiver_the_official_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loc, _, [trace] = bench_traces(tmp_path, 1_000)
    monkeypatch.setattr("socket.gethostname", lambda: "test-host")
    argv = ["export", "otlp", "--dir", str(loc.shim_dir), "--log-dir", str(loc.log_dir)]
    with receiver() as got:
        done = CliRunner().invoke(
            cli, [*argv, "--session", trace.session, "--endpoint", got.url],
            standalone_mode=False, catch_exceptions=False,
        )  # fmt: skip
        assert done.return_value == 0, done.output
        bodies = poll(lambda: got.bodies if len(got.bodies) == len(official(trace)) else None, "")
    assert bodies == official(trace)
    assert f"sent {len(trace.spans)} spans" in done.output


def test_another_exporter_gets_the_sdks_spans(tmp_path: Path) -> None:
    _, _, [trace] = bench_traces(tmp_path, 200)
    mem = InMemorySpanExporter()
    assert sdk.send(trace, mem) == (len(trace.spans), 0)
    assert [s.context.span_id for s in mem.get_finished_spans()] == [s.span_id for s in trace.spans]
