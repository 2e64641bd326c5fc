"""Attribution of processes to MCP tool calls, on real sessions (SDK client and server,
real shims, the relay): sequential calls, overlapping calls, a helper that outlives its call."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession

from mcpshim.family.attribution import Attribution
from mcpshim.family.tree import Node
from mcpshim.render.md import render_calls_text
from mcpshim.review.engine import review
from mcpshim.review.filing import regroup
from mcpshim.review.policy import default_policy, parse_policy
from mcpshim.review.rules.explain import explained
from mcpshim.review.rules.mcp_rules import session_findings
from mcpshim.shim.manifest import load_manifest
from tests.fixtures.home import Home
from tests.fixtures.mcpscenario import attribution_of, kill_helpers, make_package, run_session


def _owners(att: Attribution) -> dict[str, list[Any]]:
    """command of each process's first image -> the owners, in start order."""
    out: dict[str, list[Any]] = {}
    for node in sorted(att.nodes(), key=lambda n: (n.start or 0, n.pid)):
        out.setdefault(node.images[0].command, []).append(att.owner.get(node.id))
    return out


async def _sequential(s: ClientSession) -> None:
    # An agent thinks between calls: windows more than a clock tick (10 ms) apart.
    await s.call_tool("git_version", {})
    await anyio.sleep(0.1)
    await s.call_tool("shell", {"line": "git status >/dev/null 2>&1; exit 0"})
    await anyio.sleep(0.1)
    await s.call_tool("echo", {"text": "no process"})


def test_sequential_calls(home: Home, interpreter: str) -> None:
    run_session(home, "S-seq", _sequential, interpreter)
    att = attribution_of(home, "S-seq")
    assert [c.name for c in att.calls] == ["git_version", "shell", "echo"]
    assert all(c.response is not None and c.is_error is False for c in att.calls)
    assert _owners(att) == {"git": [0, 1], "sh": [1]}
    # The shell's git hangs below its sh, both under call #2; echo started nothing.
    [sh] = att.processes(1)
    assert [c.images[0].command for c in sh.children] == ["git"]
    assert att.processes(2) == []
    assert att.outlived == {}
    # "shell" runs any command it is given (its name and description say so): by name it
    # explains git too (issue 27 defect 11); a [tools] entry listing only sh does not.
    assert session_findings(att, default_policy()) == []
    only_sh = parse_policy('[tools]\nshell = ["sh"]\n', Path("p.toml"))
    findings = session_findings(att, only_sh)
    assert [(f.rule.id, f.evidence[0].data["command"]) for f in findings] == [("MCS502", "git")]
    assert ": tools/call shell" in findings[0].group
    # Its evidence reads as review's does: source, time, pids, argv, what it reached, and
    # the line of the shell that started it (the shim kept it: parent evidence).
    line = (
        r"\[shim\] \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z pid \d+ ppid \d+: git status -> /\S+/git"
        r"; started by \S*sh -c 'git status >/dev/null 2>&1; exit 0'"
    )
    assert re.fullmatch(line, findings[0].evidence[0].text), findings[0].evidence[0].text
    tools = parse_policy('[tools]\nshell = ["sh", "git"]\n', Path("p.toml"))
    assert session_findings(att, tools) == []
    text = render_calls_text(att)
    assert text.index("git_version") < text.index("git --version") < text.index("shell")
    # Review folds the two gits of the family into one finding; filed under tool calls, it
    # is split, each half under the call that ran it.
    result = review(
        home.records(),
        policy=default_policy(),
        session="S-seq",
        shim_dir=str(home.loc.shim_dir),
        manifest=load_manifest(home.loc.shim_dir),
    )
    [folded] = [f for f in result.findings if f.rule.id == "MCS101" and "git" in f.message]
    assert folded.count == 2 and "(2 times)" in folded.text
    split = regroup([folded], [att])
    assert [(f.count, f.text) for f in split] == [(1, folded.message)] * 2
    assert sorted(f.group.split("tools/call ")[1].split(" ")[0] for f in split) == [
        "git_version",
        "shell",
    ]
    assert all(len(f.evidence) == 1 for f in split)
    # Two results, told apart (SARIF, JSON) by the tool, the same from session to session.
    prints = {f.fingerprint for f in split}
    assert len(prints) == 2 and folded.fingerprint not in prints
    assert {f.key.rpartition("\0")[2] for f in split} == {
        "tools/call git_version",
        "tools/call shell",
    }


async def _overlapping(s: ClientSession) -> None:
    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(s.call_tool, "pause_git", {"before": 0.05, "after": 0.5})
    await anyio.sleep(0.1)
    await s.call_tool("git_version", {})


def test_overlapping_calls_are_ambiguous_not_guessed(home: Home) -> None:
    run_session(home, "S-overlap", _overlapping)
    att = attribution_of(home, "S-overlap")
    assert [c.name for c in att.calls] == ["pause_git", "pause_git", "git_version"]
    first, second, _ = att.calls
    assert first.response and second.request < first.response  # they did overlap
    assert _owners(att) == {"git": [(0, 1), (0, 1), 2]}
    # Said once for the two calls (issue 34), both gits its evidence, each call may have
    # run one of them.
    [amb] = [f for f in session_findings(att, default_policy()) if f.rule.id == "MCS503"]
    assert amb.count == 2 and "2 overlapping calls (#1-#2: pause_git (x2))" in amb.message
    assert "not said which: `git --version` (x2)" in amb.message
    text = render_calls_text(att)
    assert "ambiguous between calls #1-#2 overlapped (2 pause_git)" in text
    assert text.count("may have run: one of 2 `git --version` started while calls #1-#2") == 2


def test_helper_outlives_its_call(home: Home, tmp_path: Path) -> None:
    pkg = make_package(tmp_path)

    async def script(s: ClientSession) -> None:
        r = await s.call_tool("run_test", {"package_dir": str(pkg)})
        assert "1 test passed" in r.content[0].text  # type: ignore[union-attr]
        await anyio.sleep(0.3)
        await s.call_tool("git_version", {})

    run_session(home, "S-helper", script)
    att = attribution_of(home, "S-helper")
    try:
        run_test = att.calls[0]
        assert run_test.name == "run_test"
        # run_test -> npm -> sh -> node -> test script -> helper, all under the call.
        [npm] = att.processes(0)
        chain = []
        node: Node | None = npm
        while node is not None:
            chain.append([i.command for i in node.images])
            node = node.children[0] if node.children else None
        assert chain[0][0] == "npm" and chain[-1] == ["sleep"]
        assert any("sh" in c for c in chain) and any(c[-1] == "node" for c in chain[1:])
        [helper] = [n for n in npm.walk() if n.images[0].command == "sleep"]
        assert helper.images[0].args == (b"30",)
        assert att.owner[helper.id] == 0
        # It was still running after the call returned; nothing else was.
        assert set(att.outlived) == {helper.id}
        assert "after the call returned" in att.outlived[helper.id][1]
        findings = session_findings(att, default_policy())
        [outlived] = [f for f in findings if f.rule.id == "MCS501"]
        assert "run_test" in outlived.message and "sleep" in outlived.message
        assert outlived.evidence[0].data["pid"] == helper.pid
        # run_test says it runs tests: the runners (npm, sh, node) are what it said it does;
        # the sleep the tests left is not (issue 38: a test tool's name family, as for
        # any other); a [tools] entry says more exactly what it may start.
        [unexplained] = [f for f in findings if f.rule.id == "MCS502"]
        assert "'sleep'" in unexplained.message and unexplained.level.label == "low"
        policy = parse_policy('[tools]\nrun_test = ["npm", "sh", "node"]\n', Path("p.toml"))
        left = [f for f in session_findings(att, policy) if f.rule.id == "MCS502"]
        assert [f.evidence[0].data["command"] for f in left] == ["sleep"]
    finally:
        kill_helpers(att)


@pytest.mark.parametrize(
    ("tool", "command", "ok"),
    [
        ("git_status", "git", True),
        ("gitStatus", "git", True),
        ("run_shell", "bash", True),
        ("run_python", "python3.11", True),
        ("run_test", "npm", True),  # a test runner runs the project's runner
        ("discover_tests", "pytest", True),  # a tool's name family, whatever the verb
        ("execute_tests", "pytest", True),
        ("execute_tests", "curl", False),  # what the tests start is the tests'
        ("search_todos", "grep", True),
        ("deploy", "git-remote-https", False),  # git's helper is git: not a deploy's word
        ("git_push", "git-remote-https", True),
        ("run_command", "curl", True),  # it runs whatever command it is given
        ("format_code", "node", False),
        ("show", "sh", False),
    ],
)
def test_tool_names_explain_commands(tool: str, command: str, ok: bool) -> None:
    assert explained(tool, command, {}) is ok
    assert explained(tool, command, {tool: (command,)}) is True


@pytest.mark.parametrize(
    ("command", "arguments", "ok"),
    [
        ("bash", {"command": "bash"}, True),  # session_create {"command": "bash"}
        ("git", {"command": ["git", "status"], "directory": "/w"}, True),
        ("git", {"line": "git log -3"}, True),
        ("bash", {"shell": "/usr/bin/bash"}, True),
        ("curl", {"url": "http://curl.example/"}, False),
        ("cp", {"input": "ls"}, False),
    ],
)
def test_a_program_the_arguments_name_is_explained(
    command: str, arguments: object, ok: bool
) -> None:
    assert explained("session_create", command, {}, "", arguments) is ok
    # a [tools] entry is what someone declared: the arguments do not widen it
    assert explained("session_create", command, {"session_create": ()}, "", arguments) is False
