"""The one forest (family.tree.Forest, in columns: family.compact) and its one printer
(render.text), whichever way its images came in.

A forest is built from the process model's images (`tree.build_forest`: attribution, per
session) or from a whole log's rows (`forestread.read_forest`: `tree`, a shim's
record linked and printed without becoming an Image). Both ways must give the same
forest: the same counts, Node views, text, JSON and dot, byte for byte, on the seeded
50,000-record log of benchmarks/review_scale.py (the realistic shape: pids wrapping, two
boots, exec images, unknown parents), whose text is also what main d6f18bd printed
before issue 20, and on a small log holding the rarer cases (pid reuse, a parent that
turns up after its child, observed and traced images merged with a shim's, a session
filter, values wider than 64 bits).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from mcpshim.base.frozen import positional
from mcpshim.family import forestread, trace_merge, tree
from mcpshim.family.coverage import CoverageCollector
from mcpshim.family.view import stamp
from mcpshim.log import eventlog, execlog
from mcpshim.log.rows import ExecRows
from mcpshim.paths import Locations
from mcpshim.render.dot import render_tree_dot
from mcpshim.render.json import render_tree_json
from mcpshim.render.text import render_tree_text, stamp_of_seconds
from tests.fixtures.benchmod import load_benchmark
from tests.fixtures.home import Home
from tests.fixtures.reviewkit import fake_exec

_ = trace_merge  # registers the trace sources

BOOT_A = "aaaaaaaa-0000-4000-8000-000000000001"
BOOT_B = "bbbbbbbb-0000-4000-8000-000000000002"

#: SHA-256 of render_tree_text(forest, {}) of the seeded 50,000-record log (its temporary
#: directory written as TMP), computed with main d6f18bd's code (before issue 20) by
#: tree.build_forest(tree.images(records)); the same figure the CLI's output gave then.
MAIN_TEXT_SHA256 = "55b40f0821ccc8a3ef955501bdd4fd63cd81d14ee60a4f3e2d828a82dc2ce156"


def _bench() -> object:
    return load_benchmark("review_scale")


def _views(forest: tree.Forest) -> tuple[str, str, str]:
    return render_tree_text(forest, {}), render_tree_json(forest, {}), render_tree_dot(forest, {})


def _records(log_dir: Path) -> list[execlog.Record]:
    problems: list[execlog.LogProblem] = []
    with open(log_dir / "exec.log", "rb") as fh:
        recs = list(execlog.read_stream(fh, "exec.log", log_dir / "spill", problems))
    assert problems == []
    return recs


def _by_rows(loc: Locations, session: str | None) -> tree.Forest:
    """The forest as `tree` reads it: rows and records, linked a run at a time."""
    rows = ExecRows()
    problems: list[execlog.LogProblem] = []
    items = list(rows.iter_log(loc, problems))
    assert sum(isinstance(i, tuple) for i in items) > 10  # rows, not records
    got, _ = forestread.read_forest(
        items, rows, session, CoverageCollector(session), lambda _: None
    )
    return got


def _shape(forest: tree.Forest) -> list[tuple[int, bool, int, int]]:
    """Each Node of the forest's view, walked: (pid, known, images, children)."""
    return [(n.pid, n.known, len(n.images), len(n.children))
            for r in forest.roots for n in r.walk()]  # fmt: skip


def test_both_ways_in_give_one_forest_on_a_seeded_log(tmp_path: Path) -> None:
    bench = _bench()
    bench.generate(tmp_path / "log", tmp_path / "shims", 50_000)  # type: ignore[attr-defined]
    loc = Locations(tmp_path / "shims", tmp_path / "log")
    recs = _records(tmp_path / "log")
    assert len(recs) == 50_000
    by_images = tree.build_forest(tree.images(recs))
    by_rows = _by_rows(loc, None)
    assert (by_rows.count, by_rows.images, len(by_rows.roots)) == (
        by_images.count, by_images.images, len(by_images.roots))  # fmt: skip
    assert by_images.count > 40_000 and len(by_images.roots) > 1  # exec images, unknown roots
    text, js, dot = _views(by_rows)
    assert (text, js, dot) == _views(by_images)
    digest = hashlib.sha256(text.replace(str(tmp_path), "TMP").encode()).hexdigest()
    assert digest == MAIN_TEXT_SHA256
    # one session, as `tree --session` reads it
    sess = next(r.session for r in recs[len(recs) // 2 :] if isinstance(r, execlog.ExecRecord))
    assert _views(_by_rows(loc, sess)) == _views(tree.build_forest(tree.images(recs, sess)))


def _trace(home: Home, pid: int, ppid: int, start: int, argv: list[str], shim: bool) -> None:
    data: dict[str, object] = {
        "session": "",
        "time": "2026-01-02T03:04:05.678+02:00",
        "boot_id": BOOT_A,
    }
    data |= {"pid": pid, "ppid": ppid, "start": start, "result": "ok", "cwd": "/w"}
    data |= {"filename": "/usr/bin/" + argv[0], "argv": argv}
    if shim:
        data["via_shim"] = "/shims/" + argv[0]
    eventlog.append_event(home.loc, "trace-exec", data)


def _rare_log(home: Home) -> None:
    loc = home.loc
    # pid reuse: 500 lived at 1000 with a child, then again at 5000; a late child of the first
    fake_exec(loc, boot=BOOT_A, pid=500, ppid=1, start=1000, shim="sh", args=["-c", "a"])
    fake_exec(loc, boot=BOOT_A, pid=501, ppid=500, start=1010, args=["status"], cwd="/x")
    fake_exec(loc, boot=BOOT_A, pid=500, ppid=1, start=5000, shim="sh", args=["-c", "b"])
    fake_exec(loc, boot=BOOT_A, pid=777, ppid=500, start=5050, args=["log"], session="s1")
    fake_exec(loc, boot=BOOT_A, pid=778, ppid=500, start=1020, args=["diff"])
    fake_exec(loc, boot=BOOT_B, pid=501, ppid=500, start=1010, args=["show"])
    # a child logged before its parent: the parent adopts the unknown node's children
    fake_exec(loc, boot=BOOT_A, pid=11, ppid=10, start=105, args=["status"], session="s1")
    fake_exec(loc, boot=BOOT_A, pid=12, ppid=10, start=106, args=["log"], session="s1")
    fake_exec(
        loc, boot=BOOT_A, pid=10, ppid=1, start=100, shim="sh", args=["-c", "q"], session="s1"
    )
    # one process, several images: sh then exec git; traced halves merged into the shim's
    fake_exec(loc, boot=BOOT_A, pid=900, ppid=10, start=110, shim="sh", args=["-c", "exec git"])
    _trace(home, 900, 10, 110, ["git", "log"], shim=True)
    fake_exec(loc, boot=BOOT_A, pid=900, ppid=10, start=110, args=["log"], cwd="/y")
    _trace(home, 900, 10, 110, ["git", "log"], shim=True)  # after the shim's: not shown
    _trace(home, 901, 900, 120, ["cat", "f"], shim=True)
    _trace(home, 901, 900, 120, ["cat", "f"], shim=False)
    fake_exec(loc, boot=BOOT_A, pid=901, ppid=900, start=120, shim="cat", target="/usr/bin/cat")
    eventlog.append_event(
        loc,
        "observed",
        {"session": "s1", "time": "2026-01-02T03:04:05Z", "boot_id": BOOT_A, "pid": 950},
    )
    eventlog.append_event(
        loc,
        "observed",
        {
            "session": "",
            "time": "0999-01-02T03:04:05.5+00:00",
            "boot_id": BOOT_A,
            "pid": 951,
            "ppid": 900,
            "start": 130,
            "exe": "/usr/bin/sleep",
            "cmdline": ["sleep", "x"],
            "cmdline_b64": {"1": "/w=="},
        },
    )
    # pids and starts of up to 19 digits are read as numbers: wider than an array's int64
    wide = 9_999_999_999_999_999_999
    fake_exec(loc, boot=BOOT_A, pid=wide, ppid=wide - 1, start=wide, args=["w"])
    fake_exec(loc, boot=BOOT_A, pid=wide - 2, ppid=wide, start=wide, args=["v"])
    fake_exec(loc, boot=BOOT_A, pid=903, ppid=wide, start=wide, args=["u"])  # a row, wide


def test_both_ways_in_give_one_forest_on_rare_cases(home: Home) -> None:
    _rare_log(home)
    recs = list(home.records())
    assert any(isinstance(r, execlog.EventRecord) for r in recs)
    for session in (None, "s1", ""):
        by_images = tree.build_forest(tree.images(recs, session))
        by_rows = _by_rows(home.loc, session)
        assert _views(by_rows) == _views(by_images), session
        assert _shape(by_rows) == _shape(by_images)
        assert (by_rows.count, by_rows.images) == (by_images.count, by_images.images)
    assert "[trace" in render_tree_text(tree.build_forest(tree.images(recs)), {})
    # --root: each process with the pid, a nested one a root of its own, whichever way in
    for pid in (900, 500, 501, 10):
        a, b = by_rows.select_pid(pid), by_images.select_pid(pid)
        assert (a.count, a.images, len(a.ids)) == (b.count, b.images, len(b.ids))
        assert _views(a) == _views(b) and a.count > 0
    whole = tree.build_forest(tree.images(recs))
    five = whole.select_pid(500)  # pid 500 lived twice in boot A; in boot B, a parent unseen
    assert [(r.pid, r.known) for r in five.roots] == [(500, True), (500, True), (500, False)]
    assert (five.count, five.images) == (6, 6)
    lines = render_tree_text(whole.select_pid(901), {}).splitlines()
    assert lines[0] == "1 process(es), 2 image(s), 1 root(s)"
    # its cwd is said where it differs from its parent's (900 ran last in /y), as in the whole
    assert lines[2].startswith("901 [trace] ") and lines[2].endswith("  cwd /w")


def test_stamp_formats_as_strftime_did() -> None:
    rnd = random.Random(20)
    zones = [timezone.utc, timezone(timedelta(hours=2)), timezone(timedelta(hours=-9, minutes=-30))]
    for _ in range(20_000):
        t = datetime(1, 1, 1, tzinfo=rnd.choice(zones)) + timedelta(
            microseconds=rnd.randrange(0, 315_537_897_599_999_999)
        )
        img = tree.Image("shim", "", t, "", 1, None, None, None, b"/", "x", b"", b"", (), "")
        assert stamp(img) == t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z", t


def test_positional_builds_the_same_frozen_instance() -> None:
    make = positional(execlog.ExecRecord)
    values: tuple[object, ...] = (1.5, 2.0, "b", 7, 1, 3, None, b"/", "git", b"/g", b"/s")
    values += ("s", b"P", ("x",), (b"a",), "exec.log@0", b"", "exec", "", ())
    rec = make(*values)
    same = execlog.ExecRecord(*values)  # type: ignore[arg-type]
    assert rec == same and hash(rec) == hash(same)
    with pytest.raises(AttributeError):
        rec.pid = 8  # type: ignore[misc]
    with pytest.raises(TypeError):
        positional(execlog.LogProblem)  # no slots


def test_stamp_of_seconds_is_the_stamp_of_its_datetime() -> None:
    """The column printer's stamp rounds microseconds as datetime.fromtimestamp does."""
    rnd = random.Random(21)
    values = [rnd.uniform(0, 4e9) for _ in range(20_000)]
    values += [
        rnd.randrange(0, 4_000_000_000) + rnd.randrange(0, 1000) / 1000 for _ in range(20_000)
    ]
    values += [x + d for x in (1735689600.0, 1e9, 0.0) for d in (0.0004995, 0.9995, 0.9999995)]
    values += [1e11 - 1, 1e11, -0.5, math.nan, math.inf]
    for t in values:
        img = tree.Image(
            "shim", "", execlog._utc(t), "", 1, None, None, None, b"/", "x", b"", b"", (), ""
        )
        assert stamp_of_seconds(t) == stamp(img), t


def test_positional_takes_fields_named_like_its_helpers() -> None:
    """tree.Link has a field `new`: the maker's own names must not shadow it."""
    link = positional(tree.Link)(3, True, 1, False, None)
    assert link == tree.Link(3, True, 1, False, None)


@pytest.mark.parametrize("run", [1, 2, 3, 5, 4096])
def test_rows_linked_a_run_at_a_time_give_the_same_forest(
    home: Home, monkeypatch: pytest.MonkeyPatch, run: int
) -> None:
    """tree reads rows (log.rows) and links them a run at a time (forestread.add_rows):
    the forest of images linked one at a time, whatever the runs' length, on the rare
    cases (pid reuse, adoption, traced images merged into a row's node, wide values)."""
    _rare_log(home)
    recs = list(home.records())
    monkeypatch.setattr(forestread, "RUN", run)
    for session in (None, "s1", ""):
        new = _by_rows(home.loc, session)
        old = tree.build_forest(tree.images(recs, session))
        assert _views(new) == _views(old), session
        assert (new.count, new.images) == (old.count, old.images)


def _net(home: Home, pid: int, start: int, when: str, port: int, session: str = "") -> None:
    data = {"session": session, "time": when, "boot_id": BOOT_A, "pid": pid, "start": start}
    data |= {"call": "connect", "family": "inet", "transport": "tcp", "address": "127.0.0.1"}
    data |= {"port": port, "outcome": "connected" if port != 9 else "refused"}
    eventlog.append_event(home.loc, "trace-net", data)


def test_each_exec_shows_its_socket_calls_whichever_way_in(home: Home) -> None:
    """The tree says what review's calls say about a process's sockets, under the exec that
    made each: `net: ...` lines in text, the facts in JSON; a shim row printed as a row
    and as an image give the same bytes."""
    _rare_log(home)
    _net(home, 900, 110, "2000-01-01T00:00:00Z", 80)  # before any exec: the first (sh)
    _net(home, 900, 110, "2099-01-01T00:00:00Z", 9)  # after both: the last (git)
    _net(home, 901, 120, "2099-01-01T00:00:00Z", 443)
    _net(home, 12345, 1, "2099-01-01T00:00:00Z", 22)  # a process the log has no exec of
    recs = list(home.records())
    for session in (None, ""):
        new = _by_rows(home.loc, session)
        old = tree.build_forest(tree.images(recs, session))
        old.net = new.net  # attribution's forest is given the model's facts
        assert _views(new) == _views(old), session
        text, js, _dot = _views(new)
        lines = text.splitlines()
        sh = next(i for i, line in enumerate(lines) if "─ 900 [shim]" in line)
        assert lines[sh + 1].endswith(" net: connected to 127.0.0.1:80 (tcp)")
        assert "exec [shim]" in lines[sh + 2] and "git log" in lines[sh + 2]
        assert lines[sh + 3].endswith(" net: tried 127.0.0.1:9 (tcp): refused")
        # under the exec that made it, as an exec line is under its process's first image
        assert (
            lines[sh + 1].index("net:")
            == lines[sh + 2].index("exec")
            == lines[sh + 3].index("net:")
        )
        assert sum(" net: " in line for line in lines) == 3
        assert ":22 " not in text  # no process to show it on

        def walk(n: dict[str, Any]) -> list[dict[str, Any]]:
            return [n, *(m for k in n["children"] for m in walk(k))]

        nodes = [n for r in json.loads(js)["roots"] for n in walk(r)]
        by_pid = {n["pid"]: n for n in nodes if n["known"]}
        assert [f["port"] for f in by_pid[900]["net"]] == [80, 9]
        assert [f["command"] for f in by_pid[900]["net"]] == ["sh", "git"]
        assert by_pid[901]["net"][0]["kind"] == "reached" and by_pid[501]["net"] == []
    # one session's tree keeps that session's facts only
    assert not _by_rows(home.loc, "s1").net.by_ident


def test_relink_traced_moves_a_child_to_the_parent_the_trace_saw_fork_it(home: Home) -> None:
    """A child recorded with the subreaper as its ppid (its parent gone before its shim
    read /proc/self/stat) moves under the process the trace saw fork it: in the columns,
    so the Node views and the text say so; nothing moves where the trace names no single
    process, names the parent it has, or would put a process under its own descendant."""
    loc = home.loc
    fake_exec(loc, boot=BOOT_A, pid=10, ppid=1, start=100, shim="sh", args=["-c", "x"])
    fake_exec(loc, boot=BOOT_A, pid=20, ppid=1, start=150, args=["log"])
    fake_exec(loc, boot=BOOT_A, pid=30, ppid=10, start=160, args=["diff"])
    recs = home.records()

    def shape(f: tree.Forest) -> list[tuple[int, int | None]]:
        return [(n.pid, n.parent.pid if n.parent else None) for r in f.roots for n in r.walk()]

    before = [(1, None), (10, 1), (30, 10), (20, 1)]
    assert shape(tree.build_forest(tree.images(recs))) == before
    moved = tree.relink_traced(tree.build_forest(tree.images(recs)), {(BOOT_A, 20, 150): (10, 100)})
    assert shape(moved) == [(1, None), (10, 1), (30, 10), (20, 10)]
    text = render_tree_text(moved, {}).splitlines()
    assert [line.split(" [")[0] for line in text[2:]] == [
        "? 1 (parent not in log) boot aaaaaaaa", "└─ 10", "   ├─ 30", "   └─ 20"]  # fmt: skip
    assert (moved.count, moved.images) == (3, 3)
    cases: list[dict[tuple[str, int, int | None], tuple[int, int | None]]] = [
        {(BOOT_A, 20, 150): (10, 999)},  # no process 10 started then
        {(BOOT_A, 20, 150): (1, None)},  # the parent it has
        {(BOOT_A, 10, 100): (30, 160)},  # under its own child
    ]
    for forked_by in cases:
        kept = tree.relink_traced(tree.build_forest(tree.images(recs)), forked_by)
        assert shape(kept) == before, forked_by
