"""What every findings renderer takes: a command's findings and what they are about."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcpshim.family.coverage import SessionCoverage
from mcpshim.review.findings import Finding
from mcpshim.review.verdicts import CallVerdict

__all__ = ["COVERAGE_SHOWN", "Report", "coverage_lines", "sorted_findings"]

COVERAGE_SHOWN = 10  # sessions whose coverage line a text header shows (the latest)


@dataclass(frozen=True)
class Report:
    """What a command found, and about what (a session, a PATH, a config file)."""

    command: str
    subject: Mapping[str, Any]
    findings: Sequence[Finding]
    notes: Sequence[str] = field(default_factory=tuple)
    calls: Sequence[CallVerdict] = field(default_factory=tuple)  # relayed sessions' tool calls
    evidence: int | None = 3  # evidence lines a text report prints per finding (None: all)
    coverage: Sequence[SessionCoverage] | None = None  # review: each run session's


def coverage_lines(coverage: Sequence[SessionCoverage]) -> list[tuple[str, str]]:
    """(label, text) for a header: one session's line as `coverage`, several labelled by
    session, the latest COVERAGE_SHOWN of them."""
    if len(coverage) == 1:
        return [("coverage", coverage[0].line())]
    shown = list(coverage)[-COVERAGE_SHOWN:]
    out = [(f"coverage (session {c.session})", c.line()) for c in shown]
    if len(coverage) > len(shown):
        more = len(coverage) - len(shown)
        out.insert(0, ("coverage", f"{more} earlier session(s) not shown (use --session)"))
    return out


def sorted_findings(findings: Sequence[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.group, -f.level, f.rule.id, f.text))
