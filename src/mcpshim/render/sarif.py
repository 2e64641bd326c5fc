"""SARIF 2.1.0 for code scanning: one run, the rules of the command's family, and a
fingerprint per result so a scanner tracks a finding across runs.
"""

from __future__ import annotations

from typing import Any

from mcpshim import __version__
from mcpshim.base.display import dumps
from mcpshim.render.report import Report, sorted_findings
from mcpshim.review.catalogue import rules
from mcpshim.review.findings import Finding, Rule, Severity, finding_json, rule_json

__all__ = ["render_sarif"]


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


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    r = rule_json(rule)
    tags = ["security", *(f"external/cwe/{c.lower()}" for c in r["cwe"])]
    return {
        "id": r["id"],
        "name": r["name"],
        "shortDescription": {"text": r["summary"]},
        "fullDescription": {"text": r["summary"]},
        "help": {
            "text": f"{r['summary']}\n\nRemediation: {r['remediation']}",
            "markdown": f"{r['summary']}\n\n**Remediation:** {r['remediation']}",
        },
        "defaultConfiguration": {"level": _SARIF_LEVEL[rule.severity]},
        "properties": {
            "tags": tags,
            "security-severity": _SECURITY_SEVERITY[rule.severity],
            "confidence": rule.confidence,
        },
    }


#: a result's rank (SARIF: 0-100, its importance): the severity, weighed by how it is known
_RANK = {Severity.INFO: 10.0, Severity.LOW: 30.0, Severity.MEDIUM: 60.0, Severity.HIGH: 90.0}
_WEIGHT = {"observed": 1.0, "inferred": 0.8, "hint": 0.5}


def rank(f: Finding) -> float:
    return round(_RANK[f.level] * _WEIGHT.get(f.confidence, 1.0), 1)


def render_sarif(report: Report) -> str:
    used = sorted(
        {f.rule.id for f in report.findings}
        | {r.id for r in rules().values() if r.id[:4] == _family(report)}
    )
    index = {rid: i for i, rid in enumerate(used)}
    results, subject = [], report.subject
    for f in sorted_findings(report.findings):
        d = finding_json(f)
        at = d.get("location", {})
        uri = at.get("path") or str(subject.get("artifact") or subject.get("log", "exec.log"))
        loc: dict[str, Any] = {"physicalLocation": {"artifactLocation": {"uri": uri}}}
        if line := at.get("line"):
            loc["physicalLocation"]["region"] = {"startLine": line}
        if d["group"]:
            loc["logicalLocations"] = [{"name": d["group"], "kind": "process"}]
        said = "".join(f"\n{e['where']}: {e['text']}" for e in d["evidence"])
        results.append(
            {
                "ruleId": d["rule"],
                "ruleIndex": index[d["rule"]],
                "level": _SARIF_LEVEL[f.level],
                "message": {"text": d["message"] + said},
                "locations": [loc],
                "partialFingerprints": {"mcpshim/v1": d["fingerprint"]},
                "rank": rank(f),
                "properties": {"confidence": d["confidence"]},
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
                        "rules": [_sarif_rule(rules()[rid]) for rid in used],
                    }
                },
                "results": results,
                **_properties(report),
            }
        ],
    }
    return dumps(doc, indent=2) + "\n"


def _properties(report: Report) -> dict[str, Any]:
    """The run's property bag: each session's coverage (how complete the evidence is)."""
    if not report.coverage:
        return {}
    return {"properties": {"coverage": [c.as_json() for c in report.coverage]}}


def _family(report: Report) -> str:
    return "MCS2" if report.command == "lint-path" else "MCS1"
