"""A process span's network facts by the OpenTelemetry semantic conventions.

Each socket call the tracer saw an exec make (family.netfacts) is a span event
`mcpshim.network` on that exec's span, with `network.peer.address` (an IP literal or a Unix
socket's path), `network.peer.port`, `network.transport` (tcp, udp, unix), `network.type`
(ipv4, ipv6), `server.address` / `server.port` for the end that served (the peer of a
connect or a send, the own address of a listener; an IP or a path, never a name looked up)
and `mcpshim.network.*` for what no convention names (the call, the outcome, the DNS
questions a query carried). The span itself carries the attributes of its first
connection made (else of its first attempt), so a backend that shows attributes only sees
where the exec went.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcpshim.base.display import json_text
from mcpshim.family.netfacts import kind_of
from mcpshim.log.netrecords import NetRecord

__all__ = ["net_attributes", "net_event_attributes"]

_TYPES = {"inet": "ipv4", "inet6": "ipv6"}


def net_event_attributes(n: NetRecord) -> dict[str, Any]:
    """The attributes of one fact (None values left out by the caller's cleaning)."""
    addr = json_text(n.address) if n.address is not None else None
    transport = "unix" if n.family == "unix" else n.transport
    out: dict[str, Any] = {
        "network.peer.address": addr if n.call not in ("listen", "bind") else None,
        "network.peer.port": n.port if n.call not in ("listen", "bind") else None,
        "network.local.address": addr if n.call in ("listen", "bind") else None,
        "network.local.port": n.port if n.call in ("listen", "bind") else None,
        "network.transport": transport,
        "network.type": _TYPES.get(n.family),
        "server.address": addr if n.call != "accept" else None,
        "server.port": n.port if n.call != "accept" else None,
        "mcpshim.network.call": n.call,
        "mcpshim.network.outcome": n.outcome,
        "mcpshim.network.reached": n.reached,
        "mcpshim.network.errno": n.errno,
        "mcpshim.network.purpose": n.purpose,
        "mcpshim.network.dns.questions": [json_text(q.name) for q in n.queries] or None,
        "mcpshim.network.count": n.count if n.count > 1 else None,
    }
    return out


def net_attributes(facts: list[NetRecord]) -> Mapping[str, Any]:
    """The span's own attributes: its first connection made, else its first attempt."""
    shown = [n for n in facts if kind_of(n) not in ("plumbing", "other")]
    first = next((n for n in shown if n.reached), shown[0] if shown else None)
    if first is None:
        return {}
    attrs = net_event_attributes(first)
    attrs["mcpshim.network.destinations"] = sorted(
        {f"{a['network.peer.address']}" + (f":{a['network.peer.port']}"
                                            if a.get("network.peer.port") is not None else "")
         for n in shown if n.reached and (a := net_event_attributes(n))["network.peer.address"]}
    ) or None  # fmt: skip
    return attrs
