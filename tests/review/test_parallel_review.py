"""Parallel tool calls through the real `mcpshim run --mcp` (issue 34): what every reader
says of them, from one attribution. Calls of distinct repositories are each filed under
their own call with the reason; identical calls are one ambiguity finding, and every call,
in review's text and JSON, the report, the approval card and the OTLP spans, says what it
may have run; `sessions` and review count the same execs, with 400 calls 8 in flight."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcpshim.otel.model import process_span_id
from tests.fixtures.contract import fail_on_of, findings_code
from tests.fixtures.home import Home
from tests.fixtures.mcpscenario import (
    attribution_of,
    git_repos,
    kill_helpers,
    make_package,
    parallel,
    run_mcp_session,
)
from tests.fixtures.otelscenario import traces_of

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def _cli(home: Home, *args: str, code: int = 0) -> str:
    argv = [*MCPSHIM, *args[:1], "--dir", str(home.loc.shim_dir), *args[1:]]
    done = subprocess.run(argv, env=home.env, capture_output=True, text=True, timeout=300)
    if args[0] == "review" and "json" in args:
        code = findings_code(json.loads(done.stdout), fail_on_of(args))
    assert done.returncode == code, done.stderr
    return done.stdout + done.stderr


def _review(home: Home, sid: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(_cli(home, "review", "--session", sid, "--format", "json"))
    return doc


def test_distinct_paths_filed_by_evidence_in_review(home: Home, tmp_path: Path) -> None:
    git_repos(tmp_path, 8)
    calls = [("git_rev_parse", {"repo_path": f"D/d{i}", "after": 0.3}) for i in range(8)]
    sid = run_mcp_session(home, parallel(calls), tmp_path)
    doc = _review(home, sid)
    assert not [f for f in doc["findings"] if f["rule"] == "MCS503"]
    filed = 0
    for c in doc["calls"]:
        repo = next(
            a["repo_path"] for a in (x.arguments for x in attribution_of(home, sid).calls)
            if c["ran"] and f"-C {a['repo_path']} " in c["ran"][0]
        )  # fmt: skip
        assert c["ran"] == [f"git -C {repo} rev-parse --git-dir"], c
        assert c["may_have_run"] == [] and c["overlap_group"] is None
        for why in c["filed_by_evidence"]:
            assert why.startswith("git (pid ") and "its arguments name this call's repo_path" in why
            filed += 1
    assert filed >= 6  # the first may have started before the others came
    # The reason is in the evidence of the findings filed under each call.
    routine = [f for f in doc["findings"] if f["rule"] == "MCS101" and f.get("call")]
    said = [e for f in routine for e in f["evidence"] if "call_evidence" in e]
    assert len(said) == filed
    assert all("filed under this call: its arguments name" in e["text"] for e in said)


def test_identical_calls_said_once_everywhere(home: Home, tmp_path: Path) -> None:
    calls = [("pause_git", {"before": 0.0, "after": 0.3}) for _ in range(8)]
    sid = run_mcp_session(home, parallel(calls))
    att = attribution_of(home, sid)
    [group] = att.overlaps
    label = group.label
    # review JSON: one finding for the group, each of its calls says what it may have run
    doc = _review(home, sid)
    [amb] = [f for f in doc["findings"] if f["rule"] == "MCS503"]
    assert amb["count"] == len(group.tops) == len(amb["evidence"])
    assert amb["group"].endswith(f"overlapping tool calls {label}")
    in_group = [c for c in doc["calls"] if c["overlap_group"]]
    assert len(in_group) == len(group.calls)
    for c in in_group:
        assert c["may_have_run"] and all("`git --version` started while calls #" in m
                                         for m in c["may_have_run"])  # fmt: skip
    # review text: no call of the group says it ran nothing (its status the JSON's: a
    # checkout in /tmp runs the server from a temp dir, MCS102)
    text = _cli(home, "review", "--session", sid, code=findings_code(doc))
    assert text.count("MCS503") == 1
    blocks = text.split("\n== ")
    calls_text = [b for b in blocks if ": tools/call pause_git (id" in b.split("\n")[0]]
    assert len(calls_text) == 8
    for b in calls_text:
        if "may have run:" in b:
            assert "ran: nothing" not in b
    assert sum("may have run: " in b for b in calls_text) == len(group.calls)
    # the report (Markdown and HTML) says the group once and what each call may have run
    md = _cli(home, "report", "--session", sid, "--format", "md")
    assert md.count("### ambiguous: calls ") == 1
    assert md.count("may have run: ") == len(group.calls)
    page = tmp_path / "r.html"
    _cli(home, "report", "--session", sid, "-o", str(page))
    html = page.read_text()
    assert html.count("<b>Ambiguous</b>") == 1 and html.count("may have run: ") == len(group.calls)
    # the approval card (and approve's own words) say it was made from overlapping calls
    lock = tmp_path / "mcpshim.lock"
    out = _cli(home, "approve", "--session", sid, "--yes", "--lock", str(lock))
    assert f"ambiguous: {len(group.tops)} process(es) started while calls {label}" in out
    assert "made from overlapping calls whose processes were not told apart" in out
    # OTLP: each call of the group links to every process it may have started; those
    # hang under the session, not under any call
    [trace] = traces_of(home, sid)
    spans = {s.span_id: s for s in trace.spans}
    tops = {process_span_id(sid, n) for n in group.tops}
    calls_by_span = {s.span_id: s for s in trace.spans if s.kind == "server"}
    linked = [s for s in calls_by_span.values() if s.links]
    assert len(linked) == len(group.calls)
    for s in linked:
        assert {k.span_id for k in s.links} <= tops
        assert all(k.attributes == {"mcpshim.link.relation": "candidate_process"} for k in s.links)
        assert s.attributes["mcpshim.call.may_have_run"]
    for t in tops:
        assert spans[t].parent_id not in calls_by_span


def test_findings_of_shared_processes_answer_maybe(home: Home, tmp_path: Path) -> None:
    """Identical `npm test` calls at once, in one package: its test script runs from a
    file the agent can edit (MCS107), and no record says whose each npm was, so each call
    of the group answers "maybe" to that question, naming the finding, and never "no"."""
    pkg = make_package(tmp_path, helper_seconds=5)
    calls = [("run_test", {"package_dir": str(pkg)}) for _ in range(4)]
    sid = run_mcp_session(home, parallel(calls))
    att = attribution_of(home, sid)
    try:
        doc = _review(home, sid)
        text = _cli(home, "review", "--session", sid, code=1)
    finally:
        kill_helpers(att)
    assert att.overlaps, "the four calls did not overlap"
    in_group = [c for c in doc["calls"] if c["overlap_group"]]
    assert in_group
    for c in in_group:
        if not c["editable"]:  # its own processes (if any) said nothing: the group's may
            assert any(m.startswith("MCS107") for m in c["maybe"]["editable"]), c
    blocks = [b for b in text.split("\n== ") if ": tools/call run_test (id" in b.split("\n")[0]]
    said = [b for b in blocks if "command from an editable file: maybe (if it ran one" in b]
    assert len(said) == sum(not c["editable"] for c in in_group) > 0


def test_400_parallel_calls_count_alike(home: Home) -> None:
    """The issue's session: 400 calls, 8 in flight, each running git. `sessions` counts
    the execs review counts, the ambiguity is said once per group, no call says it ran
    nothing."""
    calls = [("pause_git", {"before": 0.0, "after": 0.02}) for _ in range(400)]
    sid = run_mcp_session(home, parallel(calls, in_flight=8))
    listed = json.loads(_cli(home, "sessions", "--format", "json"))["sessions"]
    [mine] = [s for s in listed if s["id"] == sid]
    doc = _review(home, sid)
    [cov] = doc["coverage"]
    assert mine["execs"] == cov["execs"] == 401  # 400 gits and the server
    assert mine["tool_calls"] == len(doc["calls"]) == 400
    groups = attribution_of(home, sid).overlaps
    amb = [f for f in doc["findings"] if f["rule"] == "MCS503"]
    assert len(amb) == len(groups) < 50
    assert sum(f["count"] for f in amb) == sum(len(g.tops) for g in groups)
    assert not [c for c in doc["calls"] if not c["ran"] and not c["may_have_run"]]
