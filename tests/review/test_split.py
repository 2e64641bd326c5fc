"""The two-process review gives exactly the single-pass result (forced on a small log)."""

from __future__ import annotations

import json

import pytest

from mcpshim.log import execlog
from mcpshim.render.json import render_findings_json
from mcpshim.render.report import Report
from mcpshim.review import engine as review
from mcpshim.review import policy
from mcpshim.review import split as review_split
from mcpshim.shim import manifest
from tests.fixtures.home import Home
from tests.fixtures.reviewkit import Lab, fake_exec

BOOT = "cccccccc-0000-4000-8000-000000000003"


def _json(result: review.ReviewResult) -> list[str]:
    doc = json.loads(render_findings_json(Report("review", {}, result.findings)))
    return sorted(json.dumps(f, sort_keys=True) for f in doc["findings"])


@pytest.mark.parametrize("split_min", [0, 1 << 40])
def test_split_review_equals_single_pass(
    home: Home, monkeypatch: pytest.MonkeyPatch, split_min: int
) -> None:
    lab = Lab(home)
    lab.install("sh", "git")
    for i in range(6):
        lab.run(["sh", "-c", f"git --version; git --version | cat; echo {i}"])
    # families that cross the cut: parents early, children late, pid reuse across it
    fake_exec(home.loc, boot=BOOT, pid=40, ppid=1, start=10, shim="sh", args=["-c", "a; b"])
    for i in range(30):
        fake_exec(home.loc, boot=BOOT, pid=100 + i, ppid=40, start=20 + i, args=["status"])
    fake_exec(home.loc, boot=BOOT, pid=40, ppid=1, start=900, shim="sh", args=["-c", "c; d"])
    fake_exec(home.loc, boot=BOOT, pid=200, ppid=40, start=950, args=["log"])
    fake_exec(home.loc, boot=BOOT, pid=201, ppid=999, start=960, args=["diff"])
    fake_exec(home.loc, boot=BOOT, pid=202, ppid=999, start=961, args=["diff"])
    monkeypatch.setattr(review_split, "SPLIT_MIN", split_min)
    parts: list[int] = []
    real_fold = review.fold

    def counting_fold(scans: list[review.Scan], *a: object) -> review.ReviewResult:
        parts.append(len(scans))
        return real_fold(scans, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(review_split, "fold", counting_fold)
    kw = {
        "policy": policy.default_policy(),
        "shim_dir": str(home.loc.shim_dir),
        "manifest": manifest.load_manifest(home.loc.shim_dir),
    }
    problems: list[execlog.LogProblem] = []
    single = review.review(execlog.iter_records(home.loc, problems), **kw)  # type: ignore[arg-type]
    split = review_split.review_log(home.loc, problems, workers=2, **kw)  # type: ignore[arg-type]
    assert problems == []
    assert _json(split) == _json(single)
    assert (split.records, split.images, split.processes, split.families) == (
        single.records,
        single.images,
        single.processes,
        single.families,
    )
    assert split.in_session == single.in_session == single.records
    assert parts == [2 if split_min == 0 else 1]
    assert single.families == 3  # this test process, pid 1 on BOOT, pid 999 on BOOT
