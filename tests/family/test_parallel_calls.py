"""Parallel tool calls (issue 34), on real sessions: the SDK's client sends calls at once
(an anyio task group) through the relay to the SDK's server, real shims record each git.
A process the clock and the pid marks leave to several calls goes to the one its own
records name, with why; what no record tells apart is said once per group of overlapping
calls, and each call says what it may have run."""

from __future__ import annotations

from pathlib import Path

from mcpshim.family.attribution import Attribution
from mcpshim.family.overlap import calls_label
from mcpshim.family.tree import Node
from mcpshim.review.policy import default_policy
from mcpshim.review.rules.mcp_rules import session_findings
from tests.fixtures.home import Home
from tests.fixtures.mcpscenario import attribution_of, git_repos, parallel, run_session


def _gits(att: Attribution) -> list[Node]:
    return [n for n in att.nodes() if n.images[0].command == "git"]


def test_distinct_paths_each_exec_under_its_call(home: Home, tmp_path: Path) -> None:
    """Eight calls at once, each naming its own repository (a path relative to the
    server's directory, as an agent passes it): each git is filed under exactly the call
    its `-C` argument names, the reason recorded, and no ambiguity is left."""
    git_repos(tmp_path, 8)
    calls = [("git_rev_parse", {"repo_path": f"D/d{i}", "after": 0.3}) for i in range(8)]
    run_session(home, "S-paths", parallel(calls), cwd=tmp_path)
    att = attribution_of(home, "S-paths")
    assert len(att.calls) == 8
    gits = _gits(att)
    assert len(gits) == 8
    # They overlapped: every git started while other calls were in flight, so the clock
    # and the pid marks alone left it to several (what evidence then chose among).
    assert sum(len(att.among.get(g.id, ())) > 1 for g in gits) >= 6, att.among
    for g in gits:
        owner = att.owner[g.id]
        assert isinstance(owner, int), (g.images[0].args, owner)
        repo = g.images[0].args[1].decode()  # git -C D/d<i> rev-parse --git-dir
        assert att.calls[owner].arguments["repo_path"] == repo
        if g.id in att.among:
            assert att.reasons[g.id] == "its arguments name this call's repo_path"
    assert att.overlaps == []
    assert not [f for f in session_findings(att, default_policy()) if f.rule.id == "MCS503"]


def test_argv_lists_each_exec_under_the_call_whose_value_only_it_holds(
    home: Home, tmp_path: Path
) -> None:
    """200 calls, 8 in flight, each an argv list `git -C D/d<i> rev-parse --git-dir`: the
    words every candidate holds ("git", "-C", "rev-parse") tell none apart; the directory
    only one call holds files each git under that call (issue 37 item 6)."""
    git_repos(tmp_path, 200)
    calls = [("run_argv", {"argv": ["git", "-C", f"D/d{i}", "rev-parse", "--git-dir"],
                           "after": 0.02}) for i in range(200)]  # fmt: skip
    run_session(home, "S-argv", parallel(calls, in_flight=8), cwd=tmp_path)
    att = attribution_of(home, "S-argv")
    gits = _gits(att)
    assert len(att.calls) == 200 and len(gits) == 200
    assert sum(len(att.among.get(g.id, ())) > 1 for g in gits) >= 20, "they overlapped"
    for g in gits:
        owner = att.owner[g.id]
        assert isinstance(owner, int), (g.images[0].args, owner)
        assert att.calls[owner].arguments["argv"][2] == g.images[0].args[1].decode()
    assert att.overlaps == []


def test_identical_calls_one_ambiguity_finding(home: Home) -> None:
    """Eight identical calls at once: no record tells their gits apart, so they stay
    ambiguous, the group is said once (one MCS503 listing the calls and the execs, with
    counts), and each call may have run one of them, never "nothing"."""
    calls = [("pause_git", {"before": 0.0, "after": 0.3}) for _ in range(8)]
    run_session(home, "S-same", parallel(calls))
    att = attribution_of(home, "S-same")
    gits = _gits(att)
    assert len(att.calls) == 8 and len(gits) == 8
    assert att.reasons == {}
    shared = [g for g in gits if isinstance(att.owner[g.id], tuple)]
    assert len(shared) >= 2  # the first may have started alone, before the others came
    [amb] = [f for f in session_findings(att, default_policy()) if f.rule.id == "MCS503"]
    assert amb.count == len(shared) == len(amb.evidence)
    assert f"`git --version` (x{len(shared)})" in amb.message
    [group] = att.overlaps
    assert f"{len(group.calls)} overlapping calls (#" in amb.message
    assert group.label in amb.group
    for c in group.calls:
        [may] = att.may_have_run(c)
        assert may.line == "git --version" and c in may.calls
        assert set(may.calls) <= set(group.calls)
        which = f"one of {may.count}" if may.count > 1 else "the"
        assert may.text() == (f"{which} `git --version` started while calls "
                              f"{calls_label(may.calls)} were in flight")  # fmt: skip


def test_sequential_session_is_unchanged(home: Home, interpreter: str) -> None:
    """Calls an agent awaits one by one: nothing overlaps, nothing needs evidence."""

    async def script(s: object) -> None:
        from mcp.client.session import ClientSession

        assert isinstance(s, ClientSession)
        for i in range(4):
            await s.call_tool("git_rev_parse", {"repo_path": f"/nonexistent/d{i}"})

    run_session(home, "S-seq4", script, interpreter)
    att = attribution_of(home, "S-seq4")
    gits = _gits(att)
    assert [att.owner[g.id] for g in sorted(gits, key=lambda n: n.pid)] == [0, 1, 2, 3]
    assert att.overlaps == [] and att.reasons == {} and att.among == {}
    assert not [f for f in session_findings(att, default_policy()) if f.rule.id == "MCS503"]


def test_named_by_several_narrows_to_them(home: Home, tmp_path: Path) -> None:
    """Eight calls at once on two repositories, four each: a git's `-C` names four of the
    calls in flight, so it could be any of those four and of no other; the calls of each
    repository form their own group, and each call may have run only gits of its own."""
    git_repos(tmp_path, 2)
    calls = [("git_rev_parse", {"repo_path": f"D/d{i % 2}", "after": 0.3}) for i in range(8)]
    run_session(home, "S-two", parallel(calls), cwd=tmp_path)
    att = attribution_of(home, "S-two")
    repo_of = {c.index: c.arguments["repo_path"] for c in att.calls}
    gits = _gits(att)
    assert len(gits) == 8
    shared = 0
    for g in gits:
        owner = att.owner[g.id]
        assert owner is not None
        cands = owner if isinstance(owner, tuple) else (owner,)
        assert {repo_of[c] for c in cands} == {g.images[0].args[1].decode()}, (owner, g)
        shared += isinstance(owner, tuple)
    assert shared >= 2  # identical arguments: these stay ambiguous among their own
    for grp in att.overlaps:
        assert len({repo_of[c] for c in grp.calls}) == 1, grp.calls
        for c in grp.calls:
            assert all(m.line.startswith(f"git -C {repo_of[c]} ") for m in att.may_have_run(c))
