"""Observed connections (MCS306, MCS307, and MCS303 for a traced listener): the tracer's
record of each socket call the family made (`trace-net`), judged against the policy.

Under a traced session these are the network evidence: a connection made or a datagram
sent to a destination the policy does not list is MCS306, graded by where it went (the
policy's [network] loopback, unix, remote; defaults low, low, medium); an attempt the
kernel refused, or whose outcome was never seen, is MCS307 (it reached nothing: said as the
attempt it was); a listening or receiving socket is MCS303. glibc's nscd probe is plumbing,
a connect a contained session's ruleset refused is MCS410's (contain_rules). A helper's
arguments (MCS108, MCS109) are only a hint beside these.
"""

from __future__ import annotations

from mcpshim.family.netfacts import destination, kind_of, phrase
from mcpshim.log.execlog import EventRecord
from mcpshim.log.netrecords import net_record
from mcpshim.review.findings import Evidence, Finding, Rule, Severity, define_rule
from mcpshim.review.policy import Policy
from mcpshim.review.rules.network import allowed

__all__ = ["ATTEMPT", "CONNECTED", "NET_RULES", "net_finding", "net_message"]

CONNECTED = define_rule(
    "MCS306",
    "observed-connection",
    Severity.MEDIUM,
    "The tracer saw a process of the session connect to, or send to, a destination the "
    "policy does not list (graded by [network]: loopback and Unix sockets low, remote "
    "medium by default).",
    "If the destination is expected, add it to [network].destinations (or the command's "
    "destinations) in the policy; otherwise find which tool call made the connection.",
    cwe=["CWE-200"],
    answers=("network",),
)
ATTEMPT = define_rule(
    "MCS307",
    "connection-attempt",
    Severity.LOW,
    "The tracer saw a process of the session try a destination the policy does not list "
    "and fail (refused, unreachable, timed out, or no outcome seen): nothing was reached.",
    "Find out why it tried (the tool call's arguments, a configuration file); if it should "
    "reach that destination, list it in [network].destinations.",
    cwe=["CWE-200"],
    answers=("tried",),
)


def net_finding(
    policy: Policy, listening: Rule, sid: str, rec: EventRecord, name: str
) -> Finding | None:
    """The finding one `trace-net` record makes, if any (`listening`: MCS303's rule, which
    session_rules defines). `name`: the program its process was running."""
    n = net_record(rec)
    if n is None or rec.data.get("blocked"):
        return None
    kind = kind_of(n)
    if kind in ("plumbing", "other") or n.call == "accept":
        return None  # an accept is its listener's (MCS303); an association sends nothing
    dest, scope = destination(n), n.scope
    who = name  # the pid is in the evidence: one finding folds every process of its kind
    d = rec.data
    text = f"[trace-net] {d.get('time', '?')} pid {n.pid}: {n.call} {dest} = {n.outcome}"
    text += f" ({n.errno})" if n.errno else ""
    data = {k: d.get(k) for k in ("pid", "start", "boot_id") if k in d}
    data.update(command=name, path="", destination=dest, outcome=n.outcome, at=d.get("time"),
                said=phrase(n))  # fmt: skip
    ev = (Evidence(rec.where, text, data),)
    group = f"session {sid}"
    # One finding per program and destination class (its grade), every destination named:
    # its message is made from its evidence (net_message), once filed.
    cls = scope or "unnamed"
    if kind == "listened":
        sev = policy.grade("remote" if scope in ("any", "remote") else scope)
        msg = f"{who} {phrase(n)}"
        return Finding(listening, msg, ev, group=group, key=f"{name}\0listen\0{cls}",
                       severity=sev)  # fmt: skip
    if allowed(dest, policy.allowed_destinations(name)):
        return None
    if kind == "reached":
        msg = f"{who} {phrase(n)}, which the policy does not list"
        return Finding(CONNECTED, msg, ev, group=group, key=f"{name}\0{cls}",
                       severity=policy.grade(scope))  # fmt: skip
    sev = Severity.LOW if scope in ("remote", None) else Severity.INFO
    msg = f"{who} {phrase(n)}; nothing was reached"
    return Finding(ATTEMPT, msg, ev, group=group, key=f"{name}\0{cls}\0tried", severity=sev)


_TAILS = {"MCS306": ", which the policy does not list", "MCS307": "; nothing was reached"}
NET_RULES = frozenset({"MCS303", "MCS306", "MCS307"})


def net_message(f: Finding) -> str:
    """A socket finding's message from its evidence: each program's facts, every
    destination named once, in the order they happened."""
    said: dict[str, dict[str, None]] = {}
    for ev in f.evidence:
        words = ev.data.get("said")
        if isinstance(words, str):
            said.setdefault(str(ev.data.get("command") or "?"), {})[words] = None
    if not said:
        return f.message
    return "; ".join(f"{who} {', '.join(facts)}" for who, facts in said.items()) + _TAILS.get(
        f.rule.id, "")  # fmt: skip
