"""The findings corpus as tests: each scenario is a real session, and review must say of it
exactly what is true (tests/corpus/harness.py). benchmarks/findings_quality.py prints the
same comparison as a table."""

from __future__ import annotations

import pytest

from tests.corpus.harness import (
    Outcome,
    Scenario,
    UnavailableError,
    network_problems,
    run_scenario,
    score,
)
from tests.corpus.scenarios import ALL

# Cases review is known to get wrong, and why (none today).
XFAIL: dict[str, str] = {}


def _case(sc: Scenario, trace: bool) -> object:
    cid = f"{sc.name}{'-trace' if trace else ''}"
    marks = [pytest.mark.xfail(strict=True, reason=XFAIL[cid])] if cid in XFAIL else []
    return pytest.param(sc, trace, id=cid, marks=marks)


CASES = [_case(sc, trace) for sc in ALL for trace in sc.traced]


def _explain(out: Outcome) -> str:
    lines = [f"session {out.session}; findings:"]
    lines += [f"  {g.rule} {g.severity} under {g.tool}: {g.message[:200]}" for g in out.got]
    return "\n".join(lines)


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("sc", "trace"), CASES)
def test_scenario(sc: Scenario, trace: bool) -> None:
    try:
        out = run_scenario(sc, trace)
    except UnavailableError as exc:
        pytest.skip(str(exc))
    assert out.problems == [], out.problems
    # one process model: every reader counts the same execs
    assert len(set(out.counts.values())) == 1, out.counts
    # the session's part of the log (log.scope) says what the whole log says
    assert out.scope_diff == [], out.scope_diff
    s = score(out)
    missed = [f"{e.rule} {e.severity} under {e.tool}" for e in s.missed]
    extra = [f"{g.rule} {g.severity} under {g.tool}: {g.message[:160]}"
             for g in s.extra + s.false_low]  # fmt: skip
    assert not missed and not extra, f"missed {missed}\nunexpected {extra}\n{_explain(out)}"
    # traced: every network statement is one the kernel showed (issue 29)
    assert network_problems(out) == [], _explain(out)
