"""The typed view of `trace-net` records (log.netrecords): what a reader gets, and what it
never gets (a record no writer makes is skipped, by the log's reader or by net_record)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mcpshim.log import eventlog, execlog
from mcpshim.log.execlog import EventRecord
from mcpshim.log.netrecords import net_by_process, net_record
from tests.fixtures.home import Home

BOOT = "1f93b98d-cebd-4b5e-9cc5-086743af2948"
T = "2026-12-01T21:30:39.397623+00:00"


def rec(**kw: Any) -> dict[str, Any]:
    base = {"session": "S", "time": T, "boot_id": BOOT, "pid": 7, "start": 100,
            "call": "connect", "family": "inet", "transport": "tcp", "address": "127.0.0.1",
            "port": 80, "outcome": "connected"}  # fmt: skip
    return {**base, **kw}


def read(home: Home, *payloads: dict[str, Any]) -> tuple[list[execlog.Record], list[str]]:
    for p in payloads:
        eventlog.append_event(home.loc, "trace-net", p)
    problems: list[execlog.LogProblem] = []
    recs = list(execlog.iter_records(home.loc, problems))
    return recs, [str(p) for p in problems]


def test_records_come_back_typed_per_process(home: Home) -> None:
    path = b"/tmp/s\n\xff"
    recs, problems = read(
        home,
        rec(),
        rec(pid=8, call="send", transport="udp", port=53, outcome="sent", count=3,
            last_time=T, purpose="dns", queries=[{"name": "example.test", "type": "A"}]),
        rec(call="connect", family="unix", transport="stream", port=None, outcome="absent",
            errno="ENOENT", address=path.decode("utf-8", "replace"),
            address_b64=base64.b64encode(path).decode()),
    )  # fmt: skip
    assert problems == []
    by = net_by_process(recs)
    assert list(by) == [(BOOT, 7, 100), (BOOT, 8, 100)]
    tcp, unix = by[(BOOT, 7, 100)]
    assert (tcp.reached, tcp.scope, tcp.time.isoformat()) == (True, "loopback", T)
    assert unix.address == path and unix.scope == "unix" and not unix.reached
    [dns] = by[(BOOT, 8, 100)]
    assert dns.count == 3 and dns.purpose == "dns" and dns.queries[0].name == b"example.test"


@pytest.mark.parametrize(
    ("call", "address", "scope"),
    [
        ("connect", "10.1.2.3", "remote"),
        ("connect", "::ffff:127.0.0.1", "loopback"),
        ("connect", "0.0.0.0", "loopback"),  # Linux sends it to the loopback
        ("listen", "0.0.0.0", "any"),
        ("listen", "::", "any"),
        ("send", "fe80::1%eth0", "remote"),
        ("connect", "not an address", None),
    ],
)
def test_scope_without_a_lookup(call: str, address: str, scope: str | None) -> None:
    r = net_record(EventRecord("trace-net", rec(call=call, address=address)))
    assert r is not None and r.scope == scope


def test_udp_association_and_failures_are_not_contacts() -> None:
    for outcome in ("associated", "refused", "denied", "in-progress", "listening", "bound"):
        r = net_record(EventRecord("trace-net", rec(outcome=outcome)))
        assert r is not None and not r.reached


def test_a_record_no_writer_makes_is_skipped(home: Home) -> None:
    recs, problems = read(home, rec(port="80"), rec(outcome=1), rec(queries=[{"name": 5}]))
    assert len(problems) == 3 and not [r for r in recs if r.kind == "trace-net"]
    for bad in (rec(call="exec"), rec(pid=None), rec(time="yesterday"), rec(family=None)):
        assert net_record(EventRecord("trace-net", bad)) is None
    assert net_record(EventRecord("trace-exec", rec())) is None
