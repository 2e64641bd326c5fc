"""Sessions as OpenTelemetry traces: the session is the root span, each relayed MCP call a
span, each process it started a child span, findings span events (model, pure data with
ids derived from session and record identity, so two exports agree); its spans as the
official SDK's, sent through its exporter's public API, imported only when used (sdk); and
the live stream `run --otlp` sends from a process of its own that reads the session's
records back from the log through log.follow (live), off the relay's forwarding path.

May import: base, log, shim, family, review.
"""
