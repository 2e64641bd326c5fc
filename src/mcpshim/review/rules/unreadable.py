"""MCS505: a relayed message mcpshim could not read completely.

The relay passes every byte on; what it records of a message is what it could read. A
message past the relay's limit, nested deeper than the parser goes, holding a byte that is
not UTF-8, not JSON, not a JSON-RPC object, or whose copy never reached the recorder, is
on record only by its size, its hash and why: what it asked or answered is unknown, and a
lock could not be checked against it (a tool list padded past the limit carried a drifted
tool past `review --lock`). Without `--enforce` nothing stopped it, so it is a finding of
its own, in `review` and in `review --lock` alike (high there: the approval was not
checked). Under `--enforce` the gate refused it or ended the session (relay.gate); the
finding says what came.

A session-wide rule over the relay's records (as mcp_rules' MCS504), not a check of one
image: mcp_rules.SESSION_RULES runs `unreadable_findings` per relayed session, and the
departures of `review --lock` add it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcpshim.family.attribution import Attribution
from mcpshim.review.findings import Evidence, Finding, Severity, define_rule
from mcpshim.review.policy import Policy

__all__ = ["UNREADABLE", "is_unreadable", "messages", "unreadable_findings"]

UNREADABLE = define_rule(
    "MCS505",
    "mcp-message-unreadable",
    Severity.MEDIUM,
    "A message between the MCP client and server could not be read completely (larger than "
    "the relay's limit, nested too deep, not UTF-8, not JSON, not JSON-RPC, cut by a bare "
    "carriage return into lines servers read differently, or its copy never reached the "
    "recorder): what it said is not on record, or not as every server reads it, and no "
    "approval was checked against it.",
    "Find which side sent it (its direction, size and SHA-256 are on record) and why; run the "
    "server under `mcpshim run --mcp --lock L --enforce`, which refuses such a message (or "
    "ends the session when it carries no id to answer).",
    cwe=["CWE-20"],
    answers=(),
)


def is_unreadable(u: Mapping[str, Any]) -> bool:
    """A relay record (att.unparsed) of a message not read completely. A server's line
    that is not JSON at all is not one: no client reads a message past a syntax error, so
    the gate passes it on too (a server that logs to stdout, as mcp-server-commands does)."""
    if u.get("unreadable") == "not-json" and u.get("direction") == "server->client":
        return False
    return u.get("kind") == "mcp-unrecorded" or bool(u.get("unreadable"))


def _text(u: Mapping[str, Any]) -> str:
    if u.get("kind") == "mcp-unrecorded":
        return (
            f"{u.get('direction')} {u.get('bytes')} bytes ({u.get('messages')} message(s)) "
            f"not recorded: {u.get('reason')}"
        )
    sha = str(u.get("sha256") or "")
    digest = f", sha256 {sha[:16]}" if sha else ""
    return f"{u.get('direction')} {u.get('size')} bytes{digest}: {u.get('reason')}"


def messages(u: Mapping[str, Any]) -> int:
    """How many messages a record stands for: a loss says how many it cut (at least one);
    a line not read is one."""
    n = u.get("messages")
    if u.get("kind") == "mcp-unrecorded" and isinstance(n, int) and not isinstance(n, bool):
        return max(n, 1)
    return 1


def unreadable_findings(
    att: Attribution, policy: Policy | None = None, lock: bool = False
) -> list[Finding]:
    """One finding per session that carried such messages; `lock`: under `review --lock`.
    Its count is the messages its evidence stands for (a loss of 2 messages counts 2),
    so the count, the message and the evidence say one number."""
    found = [u for u in att.unparsed if is_unreadable(u)]
    if not found:
        return []
    keys = ("direction", "size", "sha256", "unreadable", "bytes")
    evidence = tuple(
        Evidence(
            str(u.get("where", "")),
            _text(u),
            {**{k: u[k] for k in keys if k in u}, "messages": messages(u)},
        )
        for u in found
    )
    total = sum(messages(u) for u in found)
    sides = sorted({str(u.get("direction")) for u in found})
    what = "the approval was not checked against them" if lock else "they are not on record"
    return [
        Finding(
            UNREADABLE,
            f"{total} message(s) ({', '.join(sides)}) could not be read completely: {what}",
            evidence,
            f"session {att.session}",
            key="unreadable",
            severity=Severity.HIGH if lock else None,
            count=total,
        )
    ]
