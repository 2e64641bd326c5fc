"""What every findings renderer takes: a command's findings and what they are about."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcpshim.review.findings import Finding
from mcpshim.review.verdicts import CallVerdict

__all__ = ["Report", "sorted_findings"]


@dataclass(frozen=True)
class Report:
    """What a command found, and about what (a session, a PATH, a config file)."""

    command: str
    subject: Mapping[str, Any]
    findings: Sequence[Finding]
    notes: Sequence[str] = field(default_factory=tuple)
    calls: Sequence[CallVerdict] = field(default_factory=tuple)  # relayed sessions' tool calls
    evidence: int | None = 3  # evidence lines a text report prints per finding (None: all)


def sorted_findings(findings: Sequence[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.group, -f.level, f.rule.id, f.text))
