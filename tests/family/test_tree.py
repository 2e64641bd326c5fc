from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import pytest

from mcpshim.cli import main
from mcpshim.family import tree
from mcpshim.log import eventlog
from mcpshim.render.dot import render_tree_dot
from mcpshim.render.json import render_tree_json
from mcpshim.render.text import render_tree_text
from tests.fixtures.home import Home
from tests.fixtures.reviewkit import Lab, fake_exec, of

BOOT_A = "aaaaaaaa-0000-4000-8000-000000000001"
BOOT_B = "bbbbbbbb-0000-4000-8000-000000000002"


def _known(forest: tree.Forest) -> list[tree.Node]:
    return [n for r in forest.roots for n in r.walk() if n.known]


def test_real_family_and_exec_images_on_one_node(home: Home, interpreter: str) -> None:
    lab = Lab(home)
    lab.install("sh", "git", interpreter=interpreter)
    lab.run(["sh", "-c", "git --version; sh -c 'exec git --version'"], check=True)
    forest = lab.forest()
    [root] = forest.roots
    # the test process is not in the log: an unknown node for its pid is the root
    assert not root.known and root.pid == os.getpid()
    [outer] = root.children
    assert [i.command for i in outer.images] == ["sh"]
    assert outer.images[0].args == (b"-c", b"git --version; sh -c 'exec git --version'")
    kids = outer.children
    assert [[i.command for i in k.images] for k in kids] == [["git"], ["sh", "git"]]
    # `exec git` kept the pid and start time: one process, two images in order
    inner = kids[1]
    assert {(i.pid, i.start) for i in inner.images} == {(inner.pid, inner.start)}
    assert all(k.images[0].ppid == outer.pid for k in kids)
    assert forest.count == 3 and forest.images == 4

    text = render_tree_text(forest, {})
    assert f"? {os.getpid()} (parent not in log)" in text
    assert "[shim]" in text and "exec [shim]" in text
    assert "sh -c 'exec git --version'" in text
    assert f"cwd {home.root}" in text
    # cwd is shown where it changes only: the children inherit it
    assert text.count(f"cwd {home.root}") == 1

    doc = json.loads(render_tree_json(forest, {"log": "x"}))
    assert doc["schema"] == "mcpshim.tree/1"
    assert doc["summary"] == {"processes": 3, "images": 4, "roots": 1}
    node = doc["roots"][0]["children"][0]["children"][1]
    assert [i["command"] for i in node["images"]] == ["sh", "git"]
    assert node["images"][1]["argv"] == ["git", "--version"]

    dot = render_tree_dot(forest, {})
    assert dot.startswith("digraph mcpshim {") and dot.rstrip().endswith("}")
    assert dot.count("->") == 3


def test_pid_reuse_never_links_unrelated_processes(home: Home) -> None:
    loc = home.loc
    # pid 500 lived at start 1000 and had a child; pid 500 was reused at start 5000
    fake_exec(loc, boot=BOOT_A, pid=500, ppid=1, start=1000, shim="sh", args=["-c", "a"])
    fake_exec(loc, boot=BOOT_A, pid=501, ppid=500, start=1010, args=["status"])
    fake_exec(loc, boot=BOOT_A, pid=500, ppid=1, start=5000, shim="sh", args=["-c", "b"])
    fake_exec(loc, boot=BOOT_A, pid=777, ppid=500, start=5050, args=["log"])
    # a child of pid 500 forked before the second pid 500 started, logged after it
    fake_exec(loc, boot=BOOT_A, pid=778, ppid=500, start=1020, args=["diff"])
    # the same pid and start on another boot is another process
    fake_exec(loc, boot=BOOT_B, pid=501, ppid=500, start=1010, args=["show"])
    forest = tree.build_forest(tree.images(home.records()))
    by_arg = {n.images[0].args[-1]: n for n in _known(forest)}
    first, second = by_arg[b"a"], by_arg[b"b"]
    assert first is not second
    assert [c.images[0].args for c in first.children] == [(b"status",), (b"diff",)]
    assert [c.images[0].args for c in second.children] == [(b"log",)]
    other_boot = by_arg[b"show"]
    assert other_boot.parent is not None and not other_boot.parent.known
    assert other_boot.parent.boot_id == BOOT_B
    # three families: under pid 1 on boot A (both pid-500 processes), and pid 500 on boot B
    assert sorted((r.boot_id, r.pid) for r in forest.roots) == [(BOOT_A, 1), (BOOT_B, 500)]


def test_pid_reuse_makes_different_families_for_review(home: Home) -> None:
    loc = home.loc
    # 900 started before this pid 800 existed: it belonged to an earlier process 800
    fake_exec(loc, boot=BOOT_A, pid=900, ppid=800, start=100, shim="sh", args=["-c", "x; y"])
    fake_exec(loc, boot=BOOT_A, pid=800, ppid=1, start=200, shim="sh", args=["-c", "x; y"])
    fake_exec(loc, boot=BOOT_A, pid=901, ppid=800, start=300, shim="sh", args=["-c", "x; y"])
    findings = of(Lab(home).review(), "MCS105")
    groups = sorted(f.group for f in findings)
    assert len(groups) == 2
    assert "family under pid 800 (parent not in log" in groups[1]
    assert "family under pid 1 (parent not in log" in groups[0]
    counts = {f.group: len(f.evidence) for f in findings}
    assert sorted(counts.values()) == [1, 2]


def test_missing_parent_that_turns_up_adopts_its_children(home: Home) -> None:
    # a child can exec a shim before its parent does (fork, then both exec)
    fake_exec(home.loc, boot=BOOT_A, pid=11, ppid=10, start=105, args=["status"])
    fake_exec(home.loc, boot=BOOT_A, pid=10, ppid=1, start=100, shim="sh", args=["-c", "q"])
    forest = tree.build_forest(tree.images(home.records()))
    [root] = forest.roots
    [parent] = root.children
    assert parent.pid == 10 and [c.pid for c in parent.children] == [11]


def test_observed_events_are_nodes_marked_observed(home: Home) -> None:
    lab = Lab(home)
    lab.install("git")
    lab.run(["git", "--version"], check=True)
    [rec] = home.execs()
    home.loc.log_dir.mkdir(parents=True, exist_ok=True)
    eventlog.append_event(
        home.loc,
        "observed",
        {
            "session": "",
            "time": datetime.now(timezone.utc).isoformat(),
            "boot_id": rec.boot_id,
            "pid": 424242,
            "ppid": rec.pid,
            "start": (rec.start or 0) + 1,
            "parent_start": rec.start,
            "exe": "/usr/bin/sleep",
            "cmdline": ["sleep", "x", "300"],
            "cmdline_b64": {"1": "/w=="},
            "cwd": "/",
            "uid": 0,
        },
    )
    forest = tree.build_forest(tree.images(home.records()))
    [git] = [n for n in _known(forest) if n.pid == rec.pid]
    [obs] = git.children
    assert obs.sources == ("observed",)
    assert obs.images[0].args == (b"\xff", b"300")
    text = render_tree_text(forest, {})
    assert "[observed]" in text and "sleep $'\\xff' 300" in text
    doc = json.loads(render_tree_json(forest, {}))
    node = doc["roots"][0]["children"][0]["children"][0]
    assert node["sources"] == ["observed"]
    assert node["images"][0]["argv_b64"] == {"1": "/w=="}
    assert "style=dashed" in render_tree_dot(forest, {})


def test_tree_cli_formats_and_root(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    lab = Lab(home)
    lab.install("sh", "git")
    lab.run(["sh", "-c", "git --version; echo \x1b[31m"], check=True)
    for fmt in ("text", "json", "dot"):
        with pytest.raises(SystemExit) as exit_:
            main(["tree", "--format", fmt])
        assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\e[31m" in out
    [sh] = [r for r in home.execs() if r.shim == "sh"]
    with pytest.raises(SystemExit):
        main(["tree", "--root", str(sh.pid), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert [r["pid"] for r in doc["roots"]] == [sh.pid]
    assert doc["summary"]["processes"] == 2


def test_a_reused_pid_in_another_session_is_not_the_parent(home: Home) -> None:
    loc = home.loc
    # pid 600 ran git in session A; later an unlogged server got pid 600 in session B
    fake_exec(loc, boot=BOOT_A, pid=600, ppid=1, start=100, args=["status"], session="A")
    fake_exec(loc, boot=BOOT_A, pid=650, ppid=600, start=500, args=["log"], session="B")
    fake_exec(loc, boot=BOOT_A, pid=651, ppid=600, start=510, args=["diff"], session="B")
    forest = tree.build_forest(tree.images(home.records()))
    [b_root] = [r for r in forest.roots if not r.known and r.pid == 600]
    assert [c.images[0].args for c in b_root.children] == [(b"log",), (b"diff",)]
    assert {c.images[0].session for c in b_root.children} == {"B"}
