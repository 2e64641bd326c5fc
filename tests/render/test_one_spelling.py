"""One spelling of a finding and of a rule (review.findings.finding_json, rule_json): the
JSON envelope, SARIF, `rules`, the text report and the fingerprint all read it, so no
output names or identifies a finding its own way."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

from mcpshim.render.json import render_findings_json
from mcpshim.render.report import Report, sorted_findings
from mcpshim.render.sarif import render_sarif
from mcpshim.render.text import render_findings_text
from mcpshim.review.catalogue import rules
from mcpshim.review.findings import (
    CallRef,
    Evidence,
    Finding,
    Severity,
    finding_json,
    rule_json,
)


def _findings() -> list[Finding]:
    r = rules()
    call = CallRef("s1", "tools/call", "run_test", 3, "2025-01-01T00:00:00.000Z")
    return [
        Finding(
            r["MCS101"],
            "ran /tmp/x/helper",
            (Evidence("exec.log:7", "helper", {"pid": 9}),),
            "session s1",
            key="/tmp/x/helper",
            count=2,
            call=call,
        ),
        Finding(
            r["MCS201"],
            "empty PATH entry",
            (Evidence("argument PATH[0]", "(empty)"),),
            "PATH",
            "cfg.json",
            4,
            severity=Severity.HIGH,
        ),
    ]


def test_json_and_sarif_carry_the_one_spelling() -> None:
    found = _findings()
    report = Report("review", {"log": "exec.log"}, found)
    doc = json.loads(render_findings_json(report))
    assert doc["findings"] == [finding_json(f) for f in sorted_findings(found)]
    sarif = json.loads(render_sarif(report))["runs"][0]
    by_id = {d["rule"]: d for d in map(finding_json, found)}
    for res in sarif["results"]:
        d = by_id[res["ruleId"]]
        assert res["partialFingerprints"] == {"mcpshim/v1": d["fingerprint"]}
        assert res["message"]["text"].startswith(d["message"] + "\n" + d["evidence"][0]["where"])
    for rule in sarif["tool"]["driver"]["rules"]:
        r = rule_json(rules()[rule["id"]])
        assert (rule["name"], rule["shortDescription"]["text"]) == (r["name"], r["summary"])
        assert r["remediation"] in rule["help"]["text"]
    text = render_findings_text(report)
    for d in by_id.values():
        head = f"[{d['severity'].upper()}] {d['rule']} {d['name']} ({d['confidence']})"
        assert f"{head}: {d['message']}" in text


def test_the_fingerprint_is_the_rule_and_the_key_only() -> None:
    f = _findings()[0]
    part = replace(f, count=1, evidence=(), call=None, message="another part")
    assert part.fingerprint == f.fingerprint == finding_json(f)["fingerprint"]
    assert replace(f, key="/tmp/y/helper").fingerprint != f.fingerprint
    assert replace(f, rule=rules()["MCS102"]).fingerprint != f.fingerprint
    unkeyed = replace(f, key="")  # no key: the message is what identifies it
    assert unkeyed.fingerprint != replace(unkeyed, message="other").fingerprint


def test_rules_json_is_the_one_spelling() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mcpshim", "rules", "--format", "json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    want = [rule_json(r) for k, r in rules().items() if not k.startswith("MCS9")]
    assert doc == {"schema": "mcpshim.rules/1", "rules": want}
