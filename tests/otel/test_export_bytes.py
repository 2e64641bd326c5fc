"""OTLP goes out through the official exporter's public API only: `export otlp` sends a real
receiver the bytes the SDK's own encoder makes of the spans, the exporter's module is left
as the SDK made it, and any other exporter gets the same spans."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcpshim.cli import cli
from mcpshim.otel import sdk
from mcpshim.otel.model import SessionTrace
from tests.fixtures.otelscenario import bench_traces
from tests.fixtures.otlp_receiver import receiver
from tests.fixtures.runhelp import poll


def official(trace: SessionTrace, batch: int = sdk.BATCH) -> list[bytes]:
    spans = sdk.to_readable(trace)
    return [
        encode_spans(spans[i : i + batch]).SerializePartialToString()
        for i in range(0, len(spans), batch)
    ]


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


def test_the_exporter_is_used_as_the_sdk_made_it() -> None:
    """No name of the exporter's module is replaced: it encodes with the SDK's encoder."""
    from opentelemetry.exporter.otlp.proto.common import trace_encoder
    from opentelemetry.exporter.otlp.proto.http import trace_exporter

    before = dict(vars(trace_exporter))
    exporter = sdk.otlp_exporter("http://127.0.0.1:9", {})
    assert type(exporter) is trace_exporter.OTLPSpanExporter
    assert dict(vars(trace_exporter)) == before
    assert vars(trace_exporter)["encode_spans"] is trace_encoder.encode_spans
