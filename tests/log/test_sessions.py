"""`mcpshim sessions` and the session index; --session by unique prefix and `last` everywhere."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from mcpshim.family import tree
from mcpshim.log import eventlog, execlog, rotation, sessionindex, shimhelper
from mcpshim.log.sessions import list_sessions
from mcpshim.trace.probe import trace_unavailable
from tests.fixtures.home import Home, dash_path, install
from tests.fixtures.reviewkit import fake_exec
from tests.fixtures.runhelp import run

MCPSHIM = [sys.executable, "-m", "mcpshim"]
BOOT = "dddddddd-0000-4000-8000-000000000018"


def _cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [*MCPSHIM, *args]
    return subprocess.run(argv, env=home.env, capture_output=True, text=True, timeout=120)


def _session_of(r: execlog.Record) -> object:
    return r.session if isinstance(r, execlog.ExecRecord) else r.data.get("session")


def _listed(home: Home, *args: str) -> list[dict[str, object]]:
    done = _cli(home, "sessions", "--format", "json", *args)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "mcpshim.sessions/1"
    return list(doc["sessions"])


@pytest.fixture
def three(home: Home) -> Home:
    """Two real `run` sessions (the second exits 3) and one set by hand in a shell. Untraced
    (run traces by default where it can): what shims and sampling alone give the listing."""
    install(home, ["git", "true"], dash_path())
    first = run(home, ["sh", "-c", "git --version >/dev/null"], "--name", "first", "--no-trace")
    assert first.returncode == 0
    line = "git --version >/dev/null; git --version >/dev/null; exit 3"
    res = run(home, ["sh", "-c", line], "--no-trace")
    assert res.returncode == 3
    env = {**home.env, "MCPSHIM_SESSION": "by-hand-1"}
    subprocess.run(["dash", "-c", f"{home.loc.shim_dir}/true a"], env=env, check=True)
    return home


def test_one_line_per_session_newest_first(three: Home) -> None:
    got = _listed(three)
    assert [s["name"] for s in got] == [None, None, "first"]
    hand, second, first = got
    # by hand: true's shim, and the dash whose command line its record kept (no other
    # record shows that shell: the process model counts it, as tree and review do)
    assert hand["id"] == "by-hand-1" and not hand["supervised"] and hand["execs"] == 2
    assert second["exit_status"] == 3 and second["survivors"] == 0
    assert first["exit_status"] == 0
    # execs: the process model's (each exec once, whichever sources saw it): tree's count
    for s, git in ((first, 1), (second, 2)):
        recs = [r for r in three.records() if _session_of(r) == s["id"]]
        shimmed = [r for r in recs if isinstance(r, execlog.ExecRecord)]
        assert len(shimmed) == git
        assert s["execs"] == sum(i.entry for i in tree.images(three.records(), str(s["id"])))
        assert s["execs"] > git  # the sh that `run` started is an exec too
    assert first["command"] == ["sh", "-c", "git --version >/dev/null"]
    for s in (first, second):
        assert s["supervised"] and s["ended"] and not s["relayed"] and not s["traced"]
        assert isinstance(s["duration_s"], float) and str(s["start"]).endswith("Z")
        assert s["tool_calls"] == 0 and s["severity"] is None
    text = _cli(three, "sessions").stdout.splitlines()
    assert text[0].split()[:3] == ["SESSION", "START", "(UTC)"]
    assert [line.split()[0] for line in text[1:]] == [s["id"] for s in got]
    assert "first" in text[3] and "sh -c 'git --version >/dev/null'" in text[3]


@pytest.mark.skipif(trace_unavailable(None)[0] is None, reason="needs strace allowed here")
def test_a_traced_session_counts_what_the_tracer_saw(home: Home) -> None:
    # The default run traces: the listing says so and counts the traced execs.
    install(home, ["git"], dash_path())
    assert run(home, ["sh", "-c", "git --version >/dev/null; true"]).returncode == 0
    [s] = _listed(home)
    traced = [
        r
        for r in home.records()
        if isinstance(r, execlog.EventRecord)
        and r.kind == "trace-exec"
        and r.data["result"] == "ok"
        and not r.data.get("shim_helper")
    ]
    # sh, git (its shim's record: the script's and the target's traced execs are that one
    # exec; the helper that read sh's argv for it is mcpshim's own), true (a builtin): what
    # tree and review count too (issue 27 defect 7)
    assert s["traced"] and len(traced) == int(str(s["execs"])) + 1 == 3
    argv = [*MCPSHIM, "tree", "--dir", str(home.loc.shim_dir), "--session", str(s["id"])]
    tree = subprocess.run([*argv, "--format", "json"], env=home.env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert json.loads(tree.stdout)["summary"]["images"] == s["execs"]


def test_filters_since_and_server(three: Home) -> None:
    assert [s["name"] for s in _listed(three, "--server", "fir*")] == ["first"]
    assert _listed(three, "--server", "nobody") == []
    assert len(_listed(three, "--since", "1h")) == 3
    assert _listed(three, "--since", "2999-01-01T00:00:00Z") == []


def test_review_marks_its_highest_severity(three: Home) -> None:
    ids = [str(s["id"]) for s in _listed(three)]
    sid = ids[1]
    # the shortest prefix no other session shares: two sessions can start in the same second
    # and their random parts can share a first digit
    cut = next(n for n in range(18, len(sid) + 1) if [i[:n] for i in ids].count(sid[:n]) == 1)
    done = _cli(three, "review", "--session", sid[:cut], "--fail-on", "high")
    assert done.returncode == 0, done.stderr
    [listed] = [s for s in _listed(three) if s["id"] == sid]
    assert listed["severity"] in ("none", "info", "low", "medium", "high")
    others = [s for s in _listed(three) if s["id"] != sid]
    assert [s["severity"] for s in others] == [None, None]


def test_session_by_unique_prefix_or_last_everywhere(three: Home) -> None:
    got = _listed(three)
    first = str(got[2]["id"])
    for command in (["log"], ["tree"], ["review", "--fail-on", "high"]):
        done = _cli(three, *command, "--session", first[:-3])
        assert done.returncode == 0, (command, done.stderr)
        assert "first" not in done.stderr
    out = _cli(three, "log", "--session", "last", "--format", "json").stdout
    assert [json.loads(x)["session"] for x in out.splitlines()] == ["by-hand-1"]
    out = _cli(three, "log", "--session", first[:-3], "--format", "json").stdout
    assert {json.loads(x)["session"] for x in out.splitlines()} == {first}
    # a prefix two sessions share is ambiguous, one none has unknown: exit 2, one line
    a, b = str(got[1]["id"]), first
    shared = a[: next(i for i in range(len(a)) if a[i] != b[i])]
    assert shared
    done = _cli(three, "tree", "--session", shared)
    assert done.returncode == 2 and "is ambiguous: 2 sessions" in done.stderr
    done = _cli(three, "log", "--session", "zz-none")
    assert done.returncode == 2 and done.stderr.startswith("mcpshim: error: no such session")


def test_missing_or_damaged_index_is_rebuilt(three: Home) -> None:
    before = _listed(three)
    path = sessionindex.index_path(three.loc)
    path.unlink()
    assert _listed(three) == before
    path.write_bytes(b'{"version": 1, "segments": [{"dev": "x"}]}garbage')
    assert _listed(three) == before
    path.write_bytes(b'{"version": 1, "segments": [{"dev": 1, "ino": 2, "offset": "x"}]}')
    assert _listed(three) == before


def test_dropped_segment_drops_its_sessions(three: Home) -> None:
    rotation.rotate(three.loc)
    assert len(_listed(three)) == 3
    env = {**three.env, "MCPSHIM_SESSION": "after-rotation"}
    subprocess.run(["dash", "-c", f"{three.loc.shim_dir}/true b"], env=env, check=True)
    rotation.rotate(three.loc, keep=1)
    assert [s["id"] for s in _listed(three)] == ["after-rotation"]


def test_index_grown_piecemeal_equals_one_built_at_once(home: Home) -> None:
    """Appends in random pieces, with the index brought up to date between them (a record
    may be half written when it reads): the same sessions as an index built at the end."""
    rnd = random.Random(18)
    home.loc.log_dir.mkdir(parents=True)
    staging = home.loc.log_dir / "staging"
    for i in range(400):
        sess = f"S{rnd.randint(1, 9)}"
        if rnd.random() < 0.3:
            eventlog.append_event(
                home.loc,
                rnd.choice(["mcp-request", "session-start", "observed", "mcp-initialize"]),
                {"session": sess, "time": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z",
                 "method": "tools/call", "name": sess, "server_name": "srv"},
            )  # fmt: skip
        else:
            fake_exec(home.loc, boot=BOOT, pid=100 + i, ppid=1, start=i, session=sess)
    data = home.loc.log_file.read_bytes()
    home.loc.log_file.rename(staging)
    at = 0
    while at < len(data):
        step = rnd.randint(1, 4000)
        with open(home.loc.log_file, "ab") as fh:
            fh.write(data[at : at + step])
        at += step
        assert sessionindex.update(home.loc) is not None
    piecemeal = {s.id: s for s in list_sessions(home.loc)}
    sessionindex.index_path(home.loc).unlink()
    at_once = {s.id: s for s in list_sessions(home.loc)}
    assert piecemeal == at_once and len(at_once) == 9
    seen = data.count(b"\0=exec\0=") + data.count(b"\0=observed\0=")
    assert sum(s.execs for s in at_once.values()) == seen


def test_run_keeps_the_index(home: Home) -> None:
    install(home, ["true"], dash_path())
    assert run(home, ["true"]).returncode == 0
    index = sessionindex.index_path(home.loc)
    doc = json.loads(index.read_bytes().partition(b"\n")[2])  # after the digest line
    [entry] = doc["segments"]
    assert entry["offset"] == home.loc.log_file.stat().st_size  # run brought it up to date


def test_name_is_run_name_else_what_initialize_said(home: Home) -> None:
    home.loc.log_dir.mkdir(parents=True)
    for sid, name in (("S-named", "mine"), ("S-told", "")):
        start = {"session": sid, "time": "2026-01-01T00:00:00Z", "name": name, "command": ["x"]}
        eventlog.append_event(home.loc, "session-start", start)
        told = {"session": sid, "time": "2026-01-01T00:00:01Z", "server_name": "git-server",
                "server_version": "1.2"}  # fmt: skip
        eventlog.append_event(home.loc, "mcp-initialize", told)
    got = {s.id: s for s in list_sessions(home.loc)}
    assert (got["S-named"].name, got["S-named"].server) == ("mine", "git-server 1.2")
    assert (got["S-told"].name, got["S-told"].server) == ("git-server", "git-server 1.2")
    assert _listed(home, "--server", "git-*")[0]["id"] in ("S-named", "S-told")
    assert len(_listed(home, "--server", "git-*")) == 2


def test_a_log_whose_index_cannot_be_written_is_listed_all_the_same(three: Home) -> None:
    before = _listed(three)
    index = three.loc.index_dir
    for p in index.iterdir():
        p.unlink()
    index.rmdir()
    index.write_bytes(b"")  # a file where the index directory goes: nothing can be kept
    assert _listed(three) == before
    done = _cli(three, "log", "--session", "last", "--format", "json")
    assert done.returncode == 0 and "by-hand-1" in done.stdout


def test_the_shim_helper_caught_by_the_sampler_is_no_exec(home: Home) -> None:
    # The sampler may catch the shim library's argv helper alive (xargs, then its sh): that
    # is mcpshim's work; `sessions` counted it where tree and review did not (8 against 6).
    home.loc.log_dir.mkdir(parents=True)
    sid, t = "S-helper", "2026-01-01T00:00:0"
    start = {"session": sid, "time": t + "0Z", "trace": "off", "command": ["x"]}
    eventlog.append_event(home.loc, "session-start", start)
    head = ["/bin/sh", "-p", "-c", shimhelper.HELPER_SCRIPT, "sh"]
    for pid, cmdline in ((50, ["/usr/bin/xargs", *shimhelper.HELPER_XARGS, *head]),
                         (51, [*head, "sh", "-c", "git status"]),
                         (52, ["/usr/bin/curl", "-s", "http://x"])):  # fmt: skip
        eventlog.append_event(home.loc, "observed", {
            "session": sid, "time": t + "1Z", "boot_id": BOOT, "pid": pid, "ppid": 1,
            "start": pid, "exe": cmdline[0], "cmdline": cmdline, "cwd": "/"})  # fmt: skip
    eventlog.append_event(home.loc, "session-end", {"session": sid, "time": t + "2Z"})
    [s] = _listed(home)
    argv = [*MCPSHIM, "tree", "--dir", str(home.loc.shim_dir), "--session", sid, "--format", "json"]
    tree = subprocess.run(argv, env=home.env, capture_output=True, text=True, check=True)
    assert s["execs"] == json.loads(tree.stdout)["summary"]["images"] == 1
    # and review says "seen only by sampling" (MCS302) of curl alone
    argv = [*MCPSHIM, "review", "--dir", str(home.loc.shim_dir), "--session", sid, "--format",
            "json"]  # fmt: skip
    done = subprocess.run(argv, env=home.env, capture_output=True, text=True, check=False)
    sampled = [f["message"] for f in json.loads(done.stdout)["findings"] if f["rule"] == "MCS302"]
    assert len(sampled) == 1 and "curl" in sampled[0], sampled
