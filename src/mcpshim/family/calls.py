"""The MCP calls of a session as the relay recorded them: each request with its response.

A request and its response are paired by direction and JSON-RPC id; an id that is a list or
an object (a damaged log, a hostile client) is kept as its JSON text, so calls can key maps.
Fields a reader shows (the redaction rules that fired, the response's size and hash) are
taken only with the types the relay writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mcpshim.family.images import parse_time
from mcpshim.log.execlog import EventRecord

__all__ = ["Call", "parse_calls"]


@dataclass(frozen=True)
class Call:
    index: int
    id: Any
    method: str
    name: str  # tool, prompt or uri
    arguments: Any
    request: datetime
    response: datetime | None
    is_error: bool | None
    error_code: int | None
    where: str
    alive: frozenset[tuple[int, int | None]] = frozenset()
    alive_time: datetime | None = None
    #: the kernel's pid counter as the request went to the server and as its response came
    #: back (relay.core.PidMark): the pids forked inside the call are in (pid_lo, pid_hi]
    pid_lo: int | None = None
    pid_hi: int | None = None
    redacted: tuple[str, ...] = ()  # the redaction rules that fired on its arguments
    response_size: int | None = None  # bytes of the line that carried the response
    response_sha256: str = ""  # of that line (the relay never keeps its content)

    def forked_inside(self, pid: int) -> bool | None:
        """Whether a process with this pid was forked while the call ran (None: unknown).
        Pids wrap at pid_max; a call spans far fewer forks than that."""
        lo, hi = self.pid_lo, self.pid_hi
        if lo is None or hi is None:
            return None
        return lo < pid <= hi if lo <= hi else (pid > lo or pid <= hi)

    @property
    def label(self) -> str:
        return f"{self.method} {self.name} (id {self.id})"

    def duration_ms(self) -> float | None:
        if self.response is None:
            return None
        return (self.response - self.request).total_seconds() * 1000


@dataclass
class _Req:
    d: Mapping[str, Any]
    t: datetime
    where: str
    resp: Mapping[str, Any] | None = None


def parse_calls(events: list[EventRecord]) -> tuple[list[Call], list[Mapping[str, Any]]]:
    """The calls of a session in request order (each with its response, if one came), and
    the lines the relay could not parse or record (`kind`: the record's)."""
    pending: dict[tuple[str, str], _Req] = {}
    order: list[_Req] = []
    unparsed: list[Mapping[str, Any]] = []
    for ev in events:
        d = ev.data
        if ev.kind == "mcp-request":
            t = parse_time(d.get("time"))
            if t is None:
                continue
            item = _Req(d, t, ev.where)
            pending[(str(d.get("direction")), repr(d.get("id")))] = item
            order.append(item)
        elif ev.kind == "mcp-response":
            other = "client->server" if d.get("direction") == "server->client" else "server->client"
            req = pending.pop((other, repr(d.get("id"))), None)
            if req is not None:
                req.resp = d
        elif ev.kind in ("mcp-unparsed", "mcp-unrecorded"):  # (also what was not recorded)
            unparsed.append({**d, "kind": ev.kind, "where": ev.where})
    calls = []
    for i, item in enumerate(order):
        d, r = item.d, item.resp or {}
        label = next((k for k in ("tool", "prompt", "uri") if k in d), "tool")
        alive = frozenset(
            (p[0], p[1])
            for p in r.get("alive", [])
            if isinstance(p, list) and len(p) == 2 and isinstance(p[0], int)
        )
        code = r.get("error_code")
        lo, hi = d.get("last_pid"), r.get("last_pid")
        calls.append(
            Call(
                index=i,
                id=_call_id(d.get("id")),
                method=str(d.get("method")),
                name=str(d.get(label) or "?"),
                arguments=d.get("arguments"),
                request=item.t,
                response=parse_time(r.get("time")),
                is_error=bool(r["is_error"]) if "is_error" in r else None,
                error_code=code if isinstance(code, int) else None,
                where=item.where,
                alive=alive,
                alive_time=parse_time(r.get("alive_time")),
                pid_lo=lo if isinstance(lo, int) and not isinstance(lo, bool) else None,
                pid_hi=hi if isinstance(hi, int) and not isinstance(hi, bool) else None,
                redacted=_names(d.get("redacted")),
                response_size=r["size"] if isinstance(r.get("size"), int) else None,
                response_sha256=str(r.get("sha256") or ""),
            )
        )
    return calls, unparsed


def _names(value: Any) -> tuple[str, ...]:
    """A list of names as recorded; anything else (a damaged record) names none."""
    return tuple(str(x) for x in value) if isinstance(value, list) else ()


def _call_id(value: Any) -> Any:
    """A list or object id (damaged log, refused hostile call) as JSON text: a call keys maps."""
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return value
