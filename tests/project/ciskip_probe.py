"""Run only by tests/project/test_ci_skips.py, in a pytest of its own: a test that misses a
tool, and one that skips for a fact about the machine no package changes."""

from __future__ import annotations

import pytest


def test_misses_a_tool() -> None:
    pytest.skip("frobnicate not installed")


@pytest.mark.skipif(True, reason="the raw clone is x86_64's")
def test_on_another_architecture() -> None:
    pass
