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


def test_an_argv_redacted_once_is_not_redacted_again() -> None:
    """The tracer redacts each exec as it is parsed and again as its record is written at
    the session's end (issue 42's stop): the second is the first's result."""
    from mcpshim.log import redact

    token = b"ghp_" + b"c3D4" * 9
    argv = [b"git", b"clone", b"https://" + token + b"@github.com/o/r"]
    first = redact.redact_argv(argv)
    again = redact.redact_argv(list(argv))
    assert again is first and token not in b"".join(first.argv) and first.rules
    # a shim's record names its command: that is another redaction, never the memo's
    assert redact.redact_argv(argv, command="git") is not first
    big = [b"x" * (1 << 17), token]  # beyond what is remembered: redacted every time
    assert redact.redact_argv(big) is not redact.redact_argv(big)
    assert token not in b"".join(redact.redact_argv(big).argv)
