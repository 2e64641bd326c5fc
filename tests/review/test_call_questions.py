"""Each rule declares the question of a tool call's verdict it answers (review.findings'
CALL_QUESTIONS) where it is defined, and review.verdicts reads the declarations: a new rule
cannot drop out of the verdict by being left out of a hand-kept set."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest

from mcpshim.review import catalogue, verdicts
from mcpshim.review.findings import CALL_QUESTIONS, Rule, Severity, define_rule

#: the sets review/verdicts.py kept by hand until the rules declared them (issue 43)
BEFORE = {
    "new": {"MCS102", "MCS103", "MCS111", "MCS112", "MCS115", "MCS119", "MCS120", "MCS402"},
    "network": {"MCS303", "MCS304", "MCS306"},
    "tried": {"MCS307"},
    "hint": {"MCS108", "MCS109", "MCS305"},
    "editable": {"MCS107"},
    "outlived": {"MCS301", "MCS501"},
    "credentials": {"MCS413"},
    "persistence": {"MCS414"},
    "ran_written": {"MCS415"},
}


def undeclared(rules: Mapping[str, Rule]) -> list[str]:
    return [rid for rid, r in rules.items() if r.answers is None]


@pytest.fixture
def fresh_questions() -> Iterator[None]:
    verdicts.questions.cache_clear()
    yield
    verdicts.questions.cache_clear()


def test_every_rule_declares_the_question_it_answers() -> None:
    assert len(catalogue.rules()) > 60
    assert undeclared(catalogue.rules()) == []


def test_a_rule_that_declares_none_is_caught() -> None:
    """The check above is not vacuous: a rule defined without `answers` is named."""
    quiet = define_rule("MCS999", "quiet", Severity.LOW, "s", "r")
    said = define_rule("MCS998", "said", Severity.LOW, "s", "r", answers=())
    assert undeclared({**catalogue.rules(), quiet.id: quiet, said.id: said}) == ["MCS999"]


def test_the_verdict_asks_what_the_rules_declare(fresh_questions: None) -> None:
    got = {key: set(ids) for key, _text, ids in verdicts.questions()}
    assert got == BEFORE  # the same answers as the hand-kept sets gave
    assert [(k, t) for k, t, _ids in verdicts.questions()] == list(CALL_QUESTIONS.items())


def test_a_new_rule_answers_the_question_it_declares(
    fresh_questions: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    new = define_rule("MCS999", "new-thing", Severity.LOW, "s", "r", answers=("network",))
    every = {**catalogue.rules(), new.id: new}
    monkeypatch.setattr(catalogue, "rules", lambda: every)
    got = {key: ids for key, _text, ids in verdicts.questions()}
    assert got["network"] == frozenset(BEFORE["network"] | {"MCS999"})
    assert all("MCS999" not in ids for key, ids in got.items() if key != "network")


def test_an_unknown_question_is_refused() -> None:
    with pytest.raises(ValueError, match="MCS999: answers"):
        define_rule("MCS999", "x", Severity.LOW, "s", "r", answers=("newish",))
