"""The tracer's `trace-net` records as typed values, for the readers that put network facts
on processes and tool calls: one `NetRecord` per record, keyed by the process identity
every other record uses (boot id, pid, start).

What the record says is the kernel's answer (docs/log-format.md): `reached` is true only for
a connection made, a connection accepted or a datagram sent, never for an attempt that
failed or a UDP connect (which sends nothing); `scope` says where the other end is without a
name lookup. A record a writer could not have made (a field of the wrong type, an unknown
call) is not a NetRecord: `net_record` returns None, so a reader skips it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from mcpshim.log.eventfields import as_int, as_str, as_time, text_bytes
from mcpshim.log.execlog import EventRecord, Record

__all__ = ["CALLS", "DnsQuery", "Identity", "NetRecord", "net_by_process", "net_record"]

CALLS = frozenset({"connect", "listen", "bind", "accept", "send"})
#: outcomes that mean something crossed: a connection made or taken, a datagram sent
REACHED = frozenset({"connected", "accepted", "sent"})
Identity = tuple[str, int, int | None]  # boot id, pid, start ticks


@dataclass(frozen=True)
class DnsQuery:
    name: bytes  # redacted where a credential shape matched
    type: str  # A, AAAA, ... or the type's number


@dataclass(frozen=True)
class NetRecord:
    boot_id: str
    pid: int
    start: int | None
    time: datetime
    call: str  # connect | listen | bind | accept | send
    family: str  # inet | inet6 | unix | another address family
    transport: str | None  # tcp | udp | stream | dgram | seqpacket | ...
    address: bytes | None  # the other end (connect, send, accept) or its own (listen, bind)
    port: int | None
    outcome: str  # connected, associated, listening, bound, accepted, sent; refused, ...
    errno: str | None = None
    abstract: bool = False
    local_address: bytes | None = None  # accept: where the connection came in
    local_port: int | None = None
    nonblocking: bool = False
    settled: datetime | None = None
    purpose: str | None = None  # dns | name-service
    queries: tuple[DnsQuery, ...] = ()
    count: int = 1
    last_time: datetime | None = None
    tid: int | None = None
    socket: int | None = None  # the socket's inode: one socket's records share it
    session: str | None = None
    where: str = ""

    @property
    def identity(self) -> Identity:
        return (self.boot_id, self.pid, self.start)

    @property
    def reached(self) -> bool:
        """Something crossed: a connection made or accepted, a datagram sent."""
        return self.outcome in REACHED

    @property
    def scope(self) -> str | None:
        """unix, loopback, any (a listener on every interface), remote; None: unnamed."""
        if self.family == "unix":
            return "unix"
        if self.address is None or self.family not in ("inet", "inet6"):
            return None
        try:
            ip = ipaddress.ip_address(self.address.decode("ascii").split("%")[0])
        except (UnicodeDecodeError, ValueError):
            return None
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if ip.is_unspecified:  # listening on all interfaces; a connect there is loopback
            return "any" if self.call in ("listen", "bind") else "loopback"
        return "loopback" if ip.is_loopback else "remote"


def net_record(rec: Record) -> NetRecord | None:
    """The record as a NetRecord, or None: not a trace-net record, or not one mcpshim
    writes (the log's reader has checked the field types it knows; this checks the rest)."""
    if not isinstance(rec, EventRecord) or rec.kind != "trace-net":
        return None
    d = rec.data
    pid, t, call = as_int(d.get("pid")), as_time(d.get("time")), d.get("call")
    boot, family, outcome = d.get("boot_id"), d.get("family"), d.get("outcome")
    if pid is None or t is None or call not in CALLS:
        return None
    if not (isinstance(boot, str) and isinstance(family, str) and isinstance(outcome, str)):
        return None
    raw_q = d.get("queries")
    queries = tuple(
        DnsQuery(text_bytes(q, "name") or b"", q["type"])
        for q in (raw_q if isinstance(raw_q, list) else [])
        if isinstance(q, dict) and isinstance(q.get("type"), str)
    )
    count = as_int(d.get("count"))
    return NetRecord(
        boot_id=boot, pid=pid, start=as_int(d.get("start")), time=t, call=str(call),
        family=family, transport=as_str(d.get("transport")), address=text_bytes(d, "address"),
        port=as_int(d.get("port")), outcome=outcome, errno=as_str(d.get("errno")),
        abstract=d.get("abstract") is True, local_address=text_bytes(d, "local_address"),
        local_port=as_int(d.get("local_port")), nonblocking=d.get("nonblocking") is True,
        settled=as_time(d.get("settled")), purpose=as_str(d.get("purpose")), queries=queries,
        count=count if count is not None and count > 0 else 1,
        last_time=as_time(d.get("last_time")), tid=as_int(d.get("tid")),
        socket=as_int(d.get("socket")),
        session=as_str(d.get("session")), where=rec.where,
    )  # fmt: skip


def net_by_process(records: Iterable[Record]) -> dict[Identity, list[NetRecord]]:
    """Every trace-net record, per process identity, in log order."""
    out: dict[Identity, list[NetRecord]] = {}
    for r in records:
        n = net_record(r)
        if n is not None:
            out.setdefault(n.identity, []).append(n)
    return out
