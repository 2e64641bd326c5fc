"""Findings and the rule registry shared by review (MCS1xx) and lint-path (MCS2xx).

A rule is metadata (stable id, severity, summary, remediation, CWE) defined beside the
function that finds it; review.catalogue finds them all. `rule_json` and `finding_json`
are the one spelling of a rule's and a finding's fields that every output reads (`rules`,
JSON, SARIF, OTLP, text, Markdown, HTML), and `Finding.fingerprint` the one identity
across runs, so no output can name or identify a finding its own way.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any

from mcpshim.errors import UsageError

__all__ = [
    "CALL_QUESTIONS",
    "CONFIDENCES",
    "CallRef",
    "Evidence",
    "Finding",
    "Rule",
    "Severity",
    "at_or_above",
    "define_rule",
    "finding_json",
    "rule_json",
    "worst_first",
]


class Severity(IntEnum):
    INFO = 0
    LOW = 1
    MEDIUM = 2
    HIGH = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.upper()]
        except KeyError:
            raise UsageError(f"unknown severity {text!r} (info, low, medium, high)") from None


#: how a finding is known (docs/verdicts.md): the kernel or a shim saw it; read from
#: records (a composed line's words, which files a runner imports); a guess from names
CONFIDENCES = ("observed", "inferred", "hint")

#: what a tool call's verdict asks (review.verdicts), by key, in the order it is answered;
#: each rule declares which its findings answer "yes" to, so none can be left out of it
CALL_QUESTIONS = {
    "new": "new executable path",
    "network": "reached the network",
    "tried": "tried the network without reaching it",
    "hint": "named a network destination in its arguments",
    "editable": "command from an editable file",  # also: git hooks, scripts (verdicts)
    "outlived": "outlived the call",
    "credentials": "read credential files",
    "persistence": "wrote what runs later",
    "ran_written": "ran a file the session wrote",
}


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: Severity
    summary: str
    remediation: str
    cwe: tuple[str, ...] = ()
    confidence: str = "observed"
    #: the CALL_QUESTIONS its findings answer, () for none; None: it did not say (a bug
    #: tests/review/test_verdicts.py catches)
    answers: tuple[str, ...] | None = None


def define_rule(
    rule_id: str,
    name: str,
    severity: Severity,
    summary: str,
    remediation: str,
    cwe: Iterable[str] = (),
    confidence: str = "observed",
    answers: Iterable[str] | None = None,
) -> Rule:
    """A rule's metadata, beside the function that finds it; ids are stable and never
    reused (review.catalogue collects every rule and refuses an id defined twice).
    `confidence`: how its findings are known, beside how bad they are; `answers`: the
    questions of a call's verdict its findings answer (CALL_QUESTIONS' keys; () none)."""
    if confidence not in CONFIDENCES:
        raise ValueError(f"{rule_id}: confidence {confidence!r} is none of {CONFIDENCES}")
    said = None if answers is None else tuple(answers)
    if said is not None and not set(said) <= set(CALL_QUESTIONS):
        raise ValueError(f"{rule_id}: answers {said!r}: not all of {tuple(CALL_QUESTIONS)}")
    return Rule(rule_id, name, severity, summary, remediation, tuple(cwe), confidence, said)


@dataclass(frozen=True)
class Evidence:
    """What proves a finding: where it is (log position, file:line) and what it says."""

    where: str
    text: str
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CallRef:
    """The MCP tool call a finding was filed under (see review.filing.regroup)."""

    session: str
    method: str
    name: str
    id: Any
    time: str  # the request's UTC time, to the millisecond

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "method": self.method, "name": self.name,
                "id": self.id, "time": self.time}  # fmt: skip


@dataclass(frozen=True)
class Finding:
    rule: Rule
    message: str
    evidence: tuple[Evidence, ...] = ()
    group: str = ""  # the family (or config server) the finding belongs to
    location: str = ""  # a file the finding points at (SARIF artifact), if any
    line: int | None = None
    severity: Severity | None = None  # set when a policy overrides the rule's default
    key: str = ""  # what makes two findings of one rule the same finding (baselines, SARIF)
    count: int = 1  # occurrences (processes) folded into it; `evidence` holds them
    call: CallRef | None = None  # the tool call that started what it is about

    @property
    def text(self) -> str:
        """The message as shown, with how many times it occurred."""
        if self.count <= 1:
            return self.message
        return f"{self.message} ({self.count} times)"

    @property
    def level(self) -> Severity:
        return self.rule.severity if self.severity is None else self.severity

    @property
    def confidence(self) -> str:
        """How it is known: its rule's (uncertainty lowers confidence, not severity)."""
        return self.rule.confidence

    @property
    def fingerprint(self) -> str:
        """The same finding in another run (or another part of a split one) has the same:
        its rule and its key, never its count or evidence."""
        return _fingerprint(self.rule.id, self.key or self.message)

    def with_severity(self, severity: Severity) -> Finding:
        return replace(self, severity=severity)


@functools.lru_cache(maxsize=4096)  # the parts of a split finding are hashed once
def _fingerprint(rule_id: str, key: str) -> str:
    basis = f"{rule_id}\0{key}"
    return hashlib.sha256(basis.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def rule_json(rule: Rule) -> dict[str, Any]:
    """A rule's fields as every output names them (one rule of `mcpshim.rules/1`)."""
    return {"id": rule.id, "name": rule.name, "severity": rule.severity.label,
            "confidence": rule.confidence, "summary": rule.summary,
            "remediation": rule.remediation, "cwe": list(rule.cwe)}  # fmt: skip


def finding_json(f: Finding, evidence: bool = True) -> dict[str, Any]:
    """A finding's fields as every output names them (one finding of `mcpshim.findings/1`);
    without `evidence`, its head alone (no evidence, location or call)."""
    out: dict[str, Any] = {"rule": f.rule.id, "name": f.rule.name, "severity": f.level.label,
                           "confidence": f.confidence, "message": f.text, "count": f.count,
                           "group": f.group, "fingerprint": f.fingerprint}  # fmt: skip
    if not evidence:
        return out
    out["evidence"] = [{"where": e.where, "text": e.text, **dict(e.data)} for e in f.evidence]
    if f.location:
        out["location"] = {"path": f.location, "line": f.line}
    if f.call is not None:
        out["call"] = f.call.to_json()
    return out


def worst_first(findings: Iterable[Finding]) -> list[Finding]:
    """The order a page lists findings in: highest severity first, then rule, then group."""
    return sorted(findings, key=lambda f: (-f.level, f.rule.id, f.group))


def at_or_above(findings: Iterable[Finding], threshold: Severity) -> list[Finding]:
    return [f for f in findings if f.level >= threshold]
