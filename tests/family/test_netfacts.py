"""family.netfacts: the words every reader uses for a trace-net record, over records shaped
as the tracer writes them (tests/trace holds the real processes that make them; the e2e
test tests/e2e/test_net_evidence.py the whole path)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpshim.family.netfacts import NetFacts, destination, kind_of, phrase
from mcpshim.log.execlog import EventRecord
from mcpshim.log.netrecords import NetRecord, net_record


def _rec(**fields: Any) -> NetRecord:
    data = {"session": "S", "time": "2026-12-01T10:00:00+00:00", "boot_id": "B", "pid": 7,
            "start": 100, "family": "inet", "transport": "tcp", "port": None, **fields}  # fmt: skip
    n = net_record(EventRecord("trace-net", data, "exec.log@1"))
    assert n is not None
    return n


@pytest.mark.parametrize(
    ("fields", "kind", "said"),
    [
        ({"call": "connect", "address": "10.0.0.5", "port": 443, "outcome": "connected"},
         "reached", "connected to 10.0.0.5:443 (tcp)"),
        ({"call": "connect", "family": "inet6", "address": "::1", "port": 9,
          "outcome": "refused", "errno": "ECONNREFUSED"},
         "tried", "tried [::1]:9 (tcp): refused"),
        ({"call": "connect", "address": "127.0.0.1", "port": 80, "outcome": "in-progress",
          "nonblocking": True, "settled": None},
         "tried", "tried 127.0.0.1:80 (tcp): in progress, outcome not seen"),
        ({"call": "listen", "address": "0.0.0.0", "port": 0, "outcome": "listening"},
         "listened", "listened on 0.0.0.0:* (tcp)"),
        ({"call": "connect", "family": "unix", "transport": "stream", "address": "agent",
          "abstract": True, "outcome": "connected"},
         "reached", "connected to @agent (unix stream)"),
        ({"call": "connect", "family": "unix", "transport": "stream",
          "address": "/var/run/nscd/socket", "outcome": "absent", "purpose": "name-service"},
         "plumbing", "tried /var/run/nscd/socket (unix stream): absent"),
        ({"call": "connect", "transport": "udp", "address": "127.0.0.53", "port": 53,
          "outcome": "associated", "purpose": "dns"},
         "other", "set 127.0.0.53:53 as its peer (udp; nothing sent)"),
        ({"call": "send", "transport": "udp", "address": "127.0.0.53", "port": 53,
          "outcome": "sent", "purpose": "dns", "count": 2,
          "queries": [{"name": "example.org", "type": "A"}, {"name": "example.org",
                                                             "type": "AAAA"}]},
         "reached", "looked up example.org (A), example.org (AAAA) via the resolver "
                    "127.0.0.53:53 (x2)"),
        ({"call": "bind", "address": "127.0.0.1", "port": 8080, "outcome": "denied",
          "errno": "EACCES"},
         "tried", "tried to bind 127.0.0.1:8080 (tcp): denied"),
    ],
)  # fmt: skip
def test_each_fact_is_said_as_what_the_kernel_answered(
    fields: dict[str, Any], kind: str, said: str
) -> None:
    n = _rec(**fields)
    assert (kind_of(n), phrase(n)) == (kind, said)
    assert n.reached is (kind == "reached")


def test_a_path_with_control_characters_is_left_to_the_renderer() -> None:
    """The words are raw: each renderer escapes them (text, Markdown, HTML) its own way."""
    n = _rec(call="connect", family="unix", transport="stream", address="/tmp/a\x1bb",
             outcome="connected")  # fmt: skip
    assert destination(n) == "/tmp/a\x1bb"


def test_traced_sessions_are_the_ones_whose_socket_calls_were_recorded() -> None:
    facts = NetFacts()
    assert not facts.is_traced("S")
    facts.add(_rec(call="connect", address="10.0.0.5", port=443, outcome="connected"))
    assert facts.is_traced("S") and not facts.is_traced("other")
    assert [n.port for n in facts.by_ident[("B", 7, 100)]] == [443]
