"""Trace data to the official OpenTelemetry SDK's spans and its OTLP/HTTP exporter.

The SDK is an optional extra (`pip install 'mcpshim[otel]'`): it is imported here, when a
command needs it, so mcpshim works without it, and a command that needs it says so in one
line (exit 2). Spans are built as finished `ReadableSpan`s with the ids and times of the
model, not through a tracer (whose ids are random and whose times are now).

Only the SDK's public API is used: `ReadableSpan`s handed to `SpanExporter.export`, which
encodes and sends them as it always does (its endpoint, headers and OTEL_EXPORTER_OTLP_*
settings, compression, retries), so an exporter release that changes its internals changes
nothing here. pyproject bounds the versions the tests ran with.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from mcpshim import __version__
from mcpshim.errors import UsageError
from mcpshim.otel.model import SERVER, SessionTrace, SpanData

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = [
    "BATCH",
    "endpoint_url",
    "export_traces",
    "otlp_exporter",
    "require",
    "send",
    "to_readable",
]

BATCH = 512  # spans per OTLP request
MISSING = (
    "OpenTelemetry export needs the optional extra: pip install 'mcpshim[otel]' "
    "(opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http)"
)


def require() -> None:
    """Raise the one-line error (exit 2) when the extra is not installed."""
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise UsageError(MISSING) from None


def endpoint_url(url: str) -> str:
    """An OTLP/HTTP traces URL: a bare collector address gets the standard /v1/traces."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--endpoint: not an http(s) URL: {url!r}")
    if parts.path in ("", "/"):
        parts = parts._replace(path="/v1/traces")
    return urlunsplit(parts)


def parse_headers(items: Iterable[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--header: expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def otlp_exporter(url: str, headers: Mapping[str, str], timeout: float = 10.0) -> SpanExporter:
    require()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint_url(url), headers=dict(headers), timeout=timeout)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _ns(t: datetime) -> int:
    """Exact nanoseconds (no float): a record's microseconds stay what they were."""
    d = t - _EPOCH
    return (d.days * 86_400 + d.seconds) * 10**9 + d.microseconds * 1000


def to_readable(trace: SessionTrace, spans: Iterable[SpanData] | None = None) -> list[ReadableSpan]:
    """The SDK's finished spans for `spans` (default: all) of one session's trace.

    Built for the exporter's encoder, which groups spans by resource: the resource's hash
    is computed once (the SDK's own hashes its attributes as JSON for every span), and the
    contexts, statuses and attribute maps spans share are made once."""
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

    resource = _resource(trace.resource)
    scope = InstrumentationScope("mcpshim", __version__)
    flags = TraceFlags(TraceFlags.SAMPLED)
    unset = Status(StatusCode.UNSET)
    kinds = {SERVER: SpanKind.SERVER}
    contexts: dict[tuple[int, int], SpanContext] = {}

    def context(trace_id: int, span_id: int) -> SpanContext:
        ctx = contexts.get((trace_id, span_id))
        if ctx is None:
            ctx = contexts[(trace_id, span_id)] = SpanContext(
                trace_id, span_id, is_remote=False, trace_flags=flags
            )
        return ctx

    out: list[ReadableSpan] = []
    for s in trace.spans if spans is None else spans:
        parent = context(s.trace_id, s.parent_id) if s.parent_id is not None else None
        status = Status(StatusCode.ERROR, s.error) if s.error else unset
        events = [Event(e.name, e.attributes, _ns(e.time)) for e in s.events]
        links = [Link(context(s.trace_id, k.span_id), k.attributes) for k in s.links]
        out.append(
            ReadableSpan(
                name=s.name,
                context=context(s.trace_id, s.span_id),
                parent=parent,
                resource=resource,
                attributes=s.attributes,
                events=events,
                links=links,
                kind=kinds.get(s.kind, SpanKind.INTERNAL),
                status=status,
                start_time=_ns(s.start),
                end_time=_ns(s.end),
                instrumentation_scope=scope,
            )
        )
    return out


def _resource(attributes: Mapping[str, Any]) -> Resource:
    return _resource_class()(dict(attributes))


@cache
def _resource_class() -> type[Resource]:
    """The SDK's resource with its hash computed once (the SDK's hashes the attributes as
    JSON each time, and the exporter's encoder asks once per span)."""
    from opentelemetry.sdk.resources import Resource

    class _Resource(Resource):
        def __init__(self, attributes: dict[str, Any]) -> None:
            super().__init__(attributes)
            self._hash = super().__hash__()

        def __hash__(self) -> int:
            return self._hash

    return _Resource


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def send(
    trace: SessionTrace,
    exporter: SpanExporter,
    spans: Iterable[SpanData] | None = None,
    batch: int = BATCH,
) -> tuple[int, int]:
    """Send `spans` (default: all) of one trace, `batch` to a request; returns (spans sent,
    spans the endpoint did not take). An exporter that raises instead of answering FAILURE
    (1.30's, for a refused connection) failed, as the SDK's own span processors treat it."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    sent = failed = 0
    for chunk in _batches(to_readable(trace, spans), batch):
        try:
            result = exporter.export(chunk)
        except Exception:  # any exporter's failure is a batch not sent
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            sent += len(chunk)
        else:
            failed += len(chunk)
    return sent, failed


def export_traces(
    traces: Iterable[SessionTrace], exporter: SpanExporter, batch: int = BATCH
) -> tuple[int, int]:
    """Send every span; returns (spans sent, spans the endpoint did not take)."""
    sent = failed = 0
    for trace in traces:
        s, f = send(trace, exporter, batch=batch)
        sent, failed = sent + s, failed + f
    return sent, failed
