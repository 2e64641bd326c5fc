"""The corpus's scorer judged on sessions whose findings are known: it must not be fooled
(issue 38: an optional expectation that only adds, a duplicate skipped, a message never
read, a call that could be any)."""

from __future__ import annotations

from typing import Any

from tests.corpus.harness import ANY_CALL, Expect, Got, Outcome, Scenario, label_problems, score


def _outcome(kind: str, expected: tuple[Expect, ...], got: list[Got]) -> Outcome:
    sc = Scenario("s", kind, "", lambda w: [], lambda w: [], expected)
    raw: dict[str, Any] = {}
    return Outcome(sc, False, "S", got, raw, 0.0, [])


def _got(rule: str, sev: str, tool: str, message: str, nth: int | None = 1) -> Got:
    return Got(rule, sev, tool, message, 1, nth, (message,))


CURL = Expect("MCS306", "medium", "run", names=("curl",))


def test_a_finding_that_names_what_was_expected_is_a_true_positive() -> None:
    s = score(_outcome("attack", (CURL,), [_got("MCS306", "medium", "run", "curl connected")]))
    assert (s.tp, s.fp, s.fn, s.wrong) == (1, 0, 0, False)
    assert s.placed == [(CURL, True)]


def test_a_message_that_names_something_else_is_no_match() -> None:
    s = score(_outcome("attack", (CURL,), [_got("MCS306", "medium", "run", "BOGUS")]))
    assert (s.tp, s.fp, s.fn, s.wrong) == (0, 1, 1, True)
    assert s.placed == [(CURL, False)]


def test_a_second_finding_of_an_expected_kind_is_a_false_positive() -> None:
    two = [_got("MCS306", "medium", "run", "curl connected")] * 2
    assert (score(_outcome("attack", (CURL,), two)).fp) == 1
    counted = Expect("MCS306", "medium", "run", names=("curl",), count=2)
    assert score(_outcome("attack", (counted,), two)).fp == 0
    assert score(_outcome("attack", (counted,), two[:1])).fn == 1


def test_an_optional_expectation_neither_adds_nor_costs() -> None:
    maybe = Expect("MCS304", "medium", "run", optional=True, names=("curl",))
    seen = score(_outcome("attack", (maybe,), [_got("MCS304", "medium", "run", "curl")]))
    unseen = score(_outcome("attack", (maybe,), []))
    assert (seen.tp, seen.fp, seen.fn) == (0, 0, 0)
    assert (unseen.tp, unseen.fp, unseen.fn) == (0, 0, 0)


def test_the_call_is_the_tool_and_which_of_its_calls() -> None:
    second = Expect("MCS306", "medium", "nav", names=("127.0.0.1",), nth=2)
    first = [_got("MCS306", "medium", "nav", "127.0.0.1:80", nth=1)]
    assert score(_outcome("benign", (second,), first)).wrong
    ok = [_got("MCS306", "medium", "nav", "127.0.0.1:80", nth=2)]
    assert not score(_outcome("benign", (second,), ok)).wrong


def test_benign_alarms_are_their_own_figure() -> None:
    true_alarm = Expect("MCS306", "medium", "nav", names=("update.googleapis.com",))
    s = score(_outcome("benign", (true_alarm,),
                       [_got("MCS306", "medium", "nav", "update.googleapis.com")]))  # fmt: skip
    assert (s.tp, s.benign_alarms, s.wrong) == (1, 1, False)


def test_a_low_statement_nobody_expected_and_a_missing_required_one_are_wrong() -> None:
    assert score(_outcome("benign", (), [_got("MCS502", "low", "run", "x")])).wrong
    low = Expect("MCS502", "low", "run", names=("x",))
    assert score(_outcome("benign", (low,), [])).missed == [low]


def test_labels_at_medium_name_a_call_and_a_subject() -> None:
    assert label_problems((Expect("MCS306", "medium", ANY_CALL, names=("x",)),))
    assert label_problems((Expect("MCS306", "medium", "run"),))
    assert label_problems((Expect("MCS101", "info", ANY_CALL),)) == []
    assert label_problems((CURL,)) == []
    s = score(_outcome("attack", (Expect("MCS306", "medium", "run"),), []))
    assert s.labels and s.wrong


def test_untraced_the_sampler_may_see_the_socket_a_shim_record_names() -> None:
    named = Expect("MCS108", "medium", "run", names=("curl", "127.0.0.1"))
    record = _got("MCS108", "medium", "run", "curl's arguments name 127.0.0.1:9")
    socket = _got("MCS304", "medium", "run", "curl (pid 7) connected to 127.0.0.1:9")
    for got in ([record], [record, socket]):
        s = score(_outcome("attack", (named,), got))
        assert (s.tp, s.fp, s.fn, s.wrong) == (1, 0, 0, False), got
    elsewhere = _got("MCS304", "medium", "other", "curl (pid 7) connected to 127.0.0.1:9")
    assert score(_outcome("attack", (named,), [record, elsewhere])).fp == 1
    traced = Outcome(_outcome("attack", (named,), []).scenario, True, "S", [record], {}, 0, [])
    assert score(traced).fn == 1  # traced, the kernel's MCS306 is owed, not a guess
