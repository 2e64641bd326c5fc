"""A relayed session held to what its lock approved: the evidence approve, report and
`review --lock` read (review.boundary's), and the departures from the lock.

Apart from pipeline so that a plain review imports none of the lock's machinery (the
identities, the package manager's subprocess, the drift diff).
"""

from __future__ import annotations

from pathlib import Path

from mcpshim.contract.identity import Identities
from mcpshim.contract.lockfile import Lock, select_server
from mcpshim.errors import InputError
from mcpshim.family import attribution
from mcpshim.family.attribution import Attribution
from mcpshim.log import scope
from mcpshim.log.execlog import LogProblem
from mcpshim.paths import Locations
from mcpshim.review.boundary import SessionEvidence, relayed_sessions
from mcpshim.review.departures import departures
from mcpshim.review.engine import ReviewResult
from mcpshim.review.findings import Finding
from mcpshim.review.pipeline import Reviewed
from mcpshim.review.policy import Policy, apply_policy
from mcpshim.review.rules.unreadable import unreadable_findings
from mcpshim.review.verdicts import call_verdicts

__all__ = ["lock_review", "session_evidence"]


def session_evidence(
    loc: Locations, session: str | None, problems: list[LogProblem]
) -> list[tuple[Attribution, SessionEvidence]]:
    """The relayed sessions of the log (or `session`, an error when it is not there)."""
    found = relayed_sessions(
        scope.records(loc, session, problems), attribution.anchors_for(loc), session
    )
    if session is not None and not found:
        raise InputError(f"session {session} was not run with --mcp (no tool calls recorded)")
    return found


def lock_review(
    loc: Locations, session: str | None, lock: Lock, policy: Policy, kept: Path | None = None
) -> tuple[Reviewed, int]:
    """The departures of every relayed session (or `session`) from `lock`, the policy
    applied, and how many sessions were held to it (`kept`: the identity cache)."""
    problems: list[LogProblem] = []
    found = session_evidence(loc, session, problems)
    ids = Identities(kept=kept)
    out: list[Finding] = []
    for att, ev in found:
        start = att.start or {}
        server = select_server(
            lock,
            str(start.get("name", "")),
            [str(a) for a in start.get("command", ())],
            str((ev.initialize or {}).get("server_name", "")),
        )
        out += departures(att, ev, server, ids, lock.source)
        out += unreadable_findings(att, policy, lock=True)  # what no approval was checked against
    result = ReviewResult(apply_policy(out, policy), 0, 0, 0, 0)
    atts = [att for att, _ev in found]
    # each call's verdict as plain review gives it (what ran, from where), its questions
    # answered by the departures filed under it: one JSON envelope for both
    verdicts = call_verdicts(atts, result.findings)
    return Reviewed(result, atts, verdicts, problems=problems), len(found)
