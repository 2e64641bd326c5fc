"""The findings corpus as tests: each scenario is a real session, and review must say of it
exactly what is true (tests/corpus/harness.py). benchmarks/findings_quality.py prints the
same comparison as a table."""

from __future__ import annotations

import pytest

from tests.corpus.harness import (
    Outcome,
    Scenario,
    block_problems,
    label_problems,
    network_problems,
    run_scenario,
    score,
    skipped_if_unavailable,
)
from tests.corpus.scenarios import ALL

_PROJECT = (
    "the checkout's cclsp.json chose the command: known only from the server's read of it, "
    "which only a traced run's file calls show (issue 40: the traced variant finds it)"
)
#: Cases review is known to get wrong, and why (issue 38 item 6: labels before rules).
#: Strict: when the model is fixed the case passes, and its entry must go.
XFAIL: dict[str, str] = {
    "attack-cclsp-project-config": _PROJECT,
}


def _case(sc: Scenario, trace: bool) -> object:
    cid = f"{sc.name}{'-trace' if trace else ''}"
    marks = [pytest.mark.xfail(strict=True, reason=XFAIL[cid])] if cid in XFAIL else []
    return pytest.param(sc, trace, id=cid, marks=marks)


CASES = [_case(sc, trace) for sc in ALL for trace in sc.traced]


def _explain(out: Outcome) -> str:
    lines = [f"session {out.session}; findings:"]
    lines += [f"  {g.label()}" for g in out.got]
    return "\n".join(lines)


@pytest.mark.parametrize("sc", ALL, ids=[sc.name for sc in ALL])
def test_labels_can_be_judged(sc: Scenario) -> None:
    """At >= medium every expectation names its call and what its finding is about."""
    assert label_problems(sc.expected) == []
    assert label_problems(sc.expect(True)) == []


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("sc", "trace"), CASES)
def test_scenario(sc: Scenario, trace: bool) -> None:
    with skipped_if_unavailable():
        out = run_scenario(sc, trace)
    assert out.problems == [], out.problems
    # one process model: every reader counts the same execs
    assert len(set(out.counts.values())) == 1, out.counts
    # the session's part of the log (log.scope) says what the whole log says
    assert out.scope_diff == [], out.scope_diff
    s = score(out)
    missed = [e.label() for e in s.missed]
    extra = [g.label() for g in s.extra + s.false_low]
    assert not missed and not extra, f"missed {missed}\nunexpected {extra}\n{_explain(out)}"
    # traced: every network statement is one the kernel showed (issue 29)
    assert network_problems(out) == [], _explain(out)
    # every call's block says what the findings filed under it say (issue 37)
    assert block_problems(out) == [], _explain(out)
    # and review's text, the report and the approval cards file each fact as JSON does
    assert out.readers == [], out.readers
