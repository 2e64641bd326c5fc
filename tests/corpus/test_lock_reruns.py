"""A lock approved from one benign session holds (issue 37, acceptance): an identical rerun
and a rerun in another benign call order depart in nothing at >= medium, and the session
contained by the lock still gets its calls done. Playwright's browser started by whichever
call comes first, GitPython's helpers kept between calls (tests/corpus/compat.py)."""

from __future__ import annotations

import pytest

from tests.corpus.compat import REORDERED, lock_rerun, reordered
from tests.corpus.harness import skipped_if_unavailable
from tests.corpus.scenarios import ALL

_BY_NAME = {sc.name: sc for sc in ALL}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(REORDERED))
def test_an_approved_session_holds_rerun_and_reordered(name: str) -> None:
    sc = _BY_NAME[name]
    other = reordered(sc)
    assert other is not None
    with skipped_if_unavailable():
        run = lock_rerun(sc, other)
    assert run.identical == []
    assert run.reordered == []
    assert run.contained == "its calls ran"
