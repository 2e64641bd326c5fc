"""A session's spans as OTLP/protobuf request bodies, written straight from the model.

The official exporter's encoder builds one protobuf object per attribute of every span and
event (about 210,000 for a 10,000-exec session, most of them on finding events that share
their attributes) and was the largest part of `export otlp`. This writes the same bytes
(tests/otel/test_otlp_bytes.py holds them equal to the official encoder's, byte for byte)
from SpanData, and writes what repeats once: a key-value pair, and an attribute map that
several events share. The wire format is protobuf's (varints, length-delimited fields in
field-number order, proto3 defaults left out) for opentelemetry-proto's trace messages.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from mcpshim import __version__
from mcpshim.otel.model import SERVER, SessionTrace, SpanData, SpanEvent, SpanLink

__all__ = ["request_bodies"]

_KIND = {SERVER: 2}  # SPAN_KIND_SERVER; anything else SPAN_KIND_INTERNAL (1)
_FLAGS = b"\x85\x01" + struct.pack("<I", 0x100)  # field 16: SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE
_LINK_FLAGS = b"\x35" + struct.pack("<I", 0x100)  # Link.flags (6): CONTEXT_HAS_IS_REMOTE
_UNSET = b"\x7a\x00"  # status (15): an empty Status (code UNSET)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_INT64 = 1 << 63


_BYTE = [bytes((i,)) for i in range(0x80)]  # the varints of one byte


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _ld(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag, the payload's length, the payload."""
    n = len(payload)
    return tag + (_BYTE[n] if n < 0x80 else _varint(n)) + payload


def _time(tag: bytes, t: datetime) -> bytes:
    """A time field: fixed64 nanoseconds, exact (no float); the epoch itself is the default."""
    d = t - _EPOCH
    ns = ((d.days * 86_400 + d.seconds) * 10**6 + d.microseconds) * 1000
    return tag + struct.pack("<Q", ns) if ns else b""


def _any(value: Any) -> bytes:
    """An AnyValue's fields (every member of its oneof is written, its default too)."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return _ld(b"\x0a", value.encode())
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise ValueError(f"{value} is out of int64 range")
        return b"\x18" + _varint(value & 0xFFFF_FFFF_FFFF_FFFF)
    if isinstance(value, float):
        return b"\x21" + struct.pack("<d", value)
    if isinstance(value, bytes):
        return _ld(b"\x3a", value)
    if isinstance(value, Sequence):
        return _ld(b"\x2a", b"".join(_ld(b"\x0a", _any(v)) for v in value))
    if isinstance(value, Mapping):
        return _ld(b"\x32", b"".join(_ld(b"\x0a", _kv(str(k), v)) for k, v in value.items()))
    raise ValueError(f"invalid type {type(value).__name__} of value {value!r}")


def _kv(key: str, value: Any) -> bytes:
    return (_ld(b"\x0a", key.encode()) if key else b"") + _ld(b"\x12", _any(value))


class _Writer:
    """One export's caches: a pair and a shared attribute map are written once."""

    def __init__(self) -> None:
        self.pairs: dict[tuple[bytes, str, type, Any], bytes] = {}
        self.maps: dict[tuple[bytes, int], tuple[Mapping[str, Any], bytes]] = {}

    def attributes(self, tag: bytes, attrs: Mapping[str, Any]) -> bytes:
        """Each pair as a repeated field `tag` (a pair that cannot be encoded is left out,
        as the official encoder leaves it out)."""
        hit = self.maps.get((tag, id(attrs)))
        if hit is not None and hit[0] is attrs:
            return hit[1]
        out = []
        pairs = self.pairs
        for key, value in attrs.items():
            kind = type(value)
            cacheable = kind is str or kind is int or kind is bool or kind is float
            ident = (tag, key, kind, value)
            pair = pairs.get(ident) if cacheable else None
            if pair is None:
                try:
                    pair = _ld(tag, _kv(key, value))
                except (ValueError, UnicodeError):
                    continue
                if cacheable:
                    pairs[ident] = pair
            out.append(pair)
        data = b"".join(out)
        self.maps[(tag, id(attrs))] = (attrs, data)  # held: its id stays its own
        return data

    def event(self, e: SpanEvent) -> bytes:
        return (
            _time(b"\x09", e.time) + _text(b"\x12", e.name) + self.attributes(b"\x1a", e.attributes)
        )

    def link(self, trace_id: int, k: SpanLink) -> bytes:
        """Span.Link: the trace and span ids, the attributes, the flags (a local context)."""
        return (
            b"\x0a\x10" + trace_id.to_bytes(16, "big") + b"\x12\x08" + k.span_id.to_bytes(8, "big")
            + self.attributes(b"\x22", k.attributes) + _LINK_FLAGS
        )  # fmt: skip

    def span(self, s: SpanData) -> bytes:
        parts = [
            b"\x0a\x10", s.trace_id.to_bytes(16, "big"),
            b"\x12\x08", s.span_id.to_bytes(8, "big"),
        ]  # fmt: skip
        if s.parent_id is not None:
            parts += [b"\x22\x08", s.parent_id.to_bytes(8, "big")]
        parts += [
            _text(b"\x2a", s.name),
            b"\x30", _varint(_KIND.get(s.kind, 1)),
            _time(b"\x39", s.start),
            _time(b"\x41", s.end),
            self.attributes(b"\x4a", s.attributes),
        ]  # fmt: skip
        parts += [_ld(b"\x5a", self.event(e)) for e in s.events]
        parts += [_ld(b"\x6a", self.link(s.trace_id, k)) for k in s.links]
        parts.append(_ld(b"\x7a", _text(b"\x12", s.error) + b"\x18\x02") if s.error else _UNSET)
        parts.append(_FLAGS)
        return b"".join(parts)


def _text(tag: bytes, text: str) -> bytes:
    return _ld(tag, text.encode()) if text else b""


def _envelope(w: _Writer, resource: Mapping[str, Any], spans: bytes) -> bytes:
    """ExportTraceServiceRequest { resource_spans { resource, scope_spans { scope, spans } } }"""
    scope = _text(b"\x0a", "mcpshim") + _text(b"\x12", __version__)
    scope_spans = _ld(b"\x0a", scope) + spans
    body = _ld(b"\x0a", w.attributes(b"\x0a", resource)) + _ld(b"\x12", scope_spans)
    return _ld(b"\x0a", body)


def request_bodies(
    trace: SessionTrace, spans: Iterable[SpanData] | None = None, batch: int = 512
) -> Iterator[tuple[int, bytes]]:
    """(number of spans, request body) for each `batch` of `spans` (default: all), one
    request written at a time."""
    w = _Writer()
    chosen = list(trace.spans if spans is None else spans)
    for i in range(0, len(chosen), batch):
        chunk = chosen[i : i + batch]
        encoded = b"".join(_ld(b"\x12", w.span(s)) for s in chunk)
        yield len(chunk), _envelope(w, trace.resource, encoded)
