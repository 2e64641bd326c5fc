"""The redaction table compiles a rule's patterns only for a text that may hold its match
(issue 42: compiling all of them took 80 ms of every process that redacted anything, a
session-start's `--executable-path` among them); what it redacts does not change (the
corpus and fuzz tests hold the rules' output)."""

from __future__ import annotations

import json
import subprocess
import sys

CODE = """
import json
from mcpshim.log import redact, redact_engine
def compiled():
    rules = redact_engine._compiled()
    return sorted(r.rule.name for r in rules if not isinstance(r, str) and r._parts)
out = redact.redact_argv([b"playwright-mcp", b"--executable-path", b"/usr/bin/chromium"])
print(json.dumps([list(out.rules), compiled()]))
token = b"ghp_" + b"a1B2" * 9
hit = token not in redact.redact_text(b"git clone https://" + token + b"@github.com/o/r")
print(json.dumps([hit, compiled()]))
"""


def test_a_rule_compiles_only_for_a_text_that_may_hold_its_match() -> None:
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first == [[], []]  # `pat` is a needle of the table: no rule's spelling is there
    redacted, rules = second
    assert redacted is True and "github-token" in rules and len(rules) < 10
