"""Renderers: pure functions from findings to text, a versioned JSON envelope, or SARIF 2.1.0."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcpshim import __version__
from mcpshim.base.display import dumps, escape, safe
from mcpshim.review.findings import RULES, Finding, Rule, Severity

__all__ = ["JSON_SCHEMA_ID", "RENDERERS", "Report", "render_json", "render_sarif", "render_text"]

JSON_SCHEMA_ID = "mcpshim.findings/1"
INFO_URI = "https://github.com/mcpshim/mcpshim"
_SARIF_LEVEL = {
    Severity.INFO: "note",
    Severity.LOW: "note",
    Severity.MEDIUM: "warning",
    Severity.HIGH: "error",
}
_SECURITY_SEVERITY = {
    Severity.INFO: "1.0",
    Severity.LOW: "3.0",
    Severity.MEDIUM: "5.5",
    Severity.HIGH: "8.0",
}


@dataclass(frozen=True)
class Report:
    """What a command found, and about what (a session, a PATH, a config file)."""

    command: str
    subject: Mapping[str, Any]
    findings: Sequence[Finding]
    notes: Sequence[str] = field(default_factory=tuple)


def _sorted(findings: Sequence[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.group, -f.level, f.rule.id, f.text))


def render_text(report: Report) -> str:
    lines: list[str] = []
    for k, v in report.subject.items():
        lines.append(f"{k}: {escape(str(v))}")
    for note in report.notes:
        lines.append(f"note: {escape(note)}")
    if lines:
        lines.append("")
    group = None
    for f in _sorted(report.findings):
        if f.group != group:
            group = f.group
            lines.append(f"== {escape(group) if group else '(no family)'}")
        # Messages and evidence hold argv already quoted by display.quote_argv: escaping
        # again would double its backslashes; safe() still escapes any control character.
        lines.append(f"  [{f.level.label.upper()}] {f.rule.id} {f.rule.name}: {safe(f.text)}")
        for ev in f.evidence:
            lines.append(f"      {escape(ev.where)}: {safe(ev.text)}")
        lines.append(f"      fix: {safe(f.rule.remediation)}")
    counts = {s: sum(1 for f in report.findings if f.level == s) for s in Severity}
    summary = ", ".join(f"{n} {s.label}" for s, n in sorted(counts.items(), reverse=True) if n)
    lines.append(f"{len(report.findings)} finding(s)" + (f": {summary}" if summary else ""))
    return "\n".join(lines) + "\n"


def _finding_json(f: Finding) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rule": f.rule.id,
        "name": f.rule.name,
        "severity": f.level.label,
        "message": f.text,
        "count": f.count,
        "group": f.group,
        "fingerprint": f.fingerprint,
        "evidence": [{"where": e.where, "text": e.text, **dict(e.data)} for e in f.evidence],
    }
    if f.location:
        out["location"] = {"path": f.location, "line": f.line}
    return out


def render_json(report: Report) -> str:
    counts = {s.label: sum(1 for f in report.findings if f.level == s) for s in Severity}
    doc = {
        "schema": JSON_SCHEMA_ID,
        "tool": {"name": "mcpshim", "version": __version__},
        "command": report.command,
        "subject": dict(report.subject),
        "notes": list(report.notes),
        "summary": {"total": len(report.findings), "by_severity": counts},
        "findings": [_finding_json(f) for f in _sorted(report.findings)],
    }
    return dumps(doc, indent=2) + "\n"


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    tags = ["security", *(f"external/cwe/{c.lower()}" for c in rule.cwe)]
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.summary},
        "help": {
            "text": f"{rule.summary}\n\nRemediation: {rule.remediation}",
            "markdown": f"{rule.summary}\n\n**Remediation:** {rule.remediation}",
        },
        "defaultConfiguration": {"level": _SARIF_LEVEL[rule.severity]},
        "properties": {"tags": tags, "security-severity": _SECURITY_SEVERITY[rule.severity]},
    }


def render_sarif(report: Report) -> str:
    used = sorted(
        {f.rule.id for f in report.findings}
        | {r.id for r in RULES.values() if r.id[:4] == _family(report)}
    )
    index = {rid: i for i, rid in enumerate(used)}
    results = []
    for f in _sorted(report.findings):
        loc: dict[str, Any] = {
            "physicalLocation": {
                "artifactLocation": {
                    "uri": f.location
                    or str(report.subject.get("artifact") or report.subject.get("log", "exec.log"))
                },
            }
        }
        if f.line:
            loc["physicalLocation"]["region"] = {"startLine": f.line}
        if f.group:
            loc["logicalLocations"] = [{"name": f.group, "kind": "process"}]
        results.append(
            {
                "ruleId": f.rule.id,
                "ruleIndex": index[f.rule.id],
                "level": _SARIF_LEVEL[f.level],
                "message": {"text": f.text + "".join(f"\n{e.where}: {e.text}" for e in f.evidence)},
                "locations": [loc],
                "partialFingerprints": {"mcpshim/v1": f.fingerprint},
            }
        )
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "mcpshim",
                        "version": __version__,
                        "informationUri": INFO_URI,
                        "rules": [_sarif_rule(RULES[rid]) for rid in used],
                    }
                },
                "results": results,
            }
        ],
    }
    return dumps(doc, indent=2) + "\n"


def _family(report: Report) -> str:
    return "MCS2" if report.command == "lint-path" else "MCS1"


RENDERERS: dict[str, Callable[[Report], str]] = {
    "text": render_text,
    "json": render_json,
    "sarif": render_sarif,
}
