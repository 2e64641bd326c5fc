"""The whole family: survivors, containment, double-forked helpers, unshimmed descendants."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpshim.proc.procinfo import start_ticks
from tests.fixtures.home import Home, install
from tests.fixtures.runhelp import events, kill_all, only_session, run, session_pids


@pytest.fixture
def cleanup() -> Iterator[list[int]]:
    """Pids a test may leave behind on failure; killed whatever happens."""
    pids: list[int] = []
    yield pids
    kill_all(pids)


# `until ...`: the shell exits once its child runs sleep, so the survivor's evidence is the
# sleep's (traced, as by default, a child takes longer from fork to exec than the shell from
# fork to exit).
WAIT_EXEC = 'until read c < /proc/$!/comm && [ "$c" = sleep ]; do :; done'


def test_backgrounded_helper_is_reported_as_survivor(home: Home, cleanup: list[int]) -> None:
    res = run(home, ["sh", "-c", f"sleep 300 & {WAIT_EXEC}; exit 0"])
    assert res.returncode == 0
    sid = only_session(home)
    cleanup += session_pids(sid)
    [surv] = events(home, "survivor")
    cleanup.append(surv["pid"])
    assert surv["cmdline"] == ["sleep", "300"]
    assert surv["action"] == "reported"
    assert surv["exe"].endswith("/sleep")
    assert surv["start"] == start_ticks(surv["pid"])  # the very process, still alive
    for key in ("session", "time", "boot_id", "pid", "ppid", "start", "exe", "cmdline", "cwd"):
        assert key in surv
    [end] = events(home, "session-end")
    assert end["survivors"] == 1 and end["terminated"] is False
    # The tracer stays with the survivor it traces (mcpshim's, not the family's).
    tracer = [s["tracer_pid"] for s in events(home, "trace-summary", sid)]
    assert [p for p in session_pids(sid) if p not in tracer] == [surv["pid"]]


def test_terminate_leaves_nothing_of_the_family(home: Home, cleanup: list[int]) -> None:
    line = f"sleep 300 & {WAIT_EXEC}; sleep 301 & {WAIT_EXEC}; exit 0"
    res = run(home, ["sh", "-c", line], "--on-exit", "terminate")
    assert res.returncode == 0
    sid = only_session(home)
    cleanup += session_pids(sid)
    assert session_pids(sid) == []
    survivors = events(home, "survivor")
    assert sorted(s["cmdline"][1] for s in survivors) == ["300", "301"]
    assert {s["action"] for s in survivors} == {"terminated"}
    for s in survivors:
        assert not Path(f"/proc/{s['pid']}").exists() or start_ticks(s["pid"]) != s["start"]
    reaped = {r["pid"]: r["status"] for r in events(home, "reaped")}
    assert all(reaped[s["pid"]] == 143 for s in survivors)
    [end] = events(home, "session-end")
    assert end["survivors"] == 2 and end["terminated"] is True


def test_setsid_double_fork_is_found_and_terminated(home: Home, cleanup: list[int]) -> None:
    helper = "(setsid sh -c 'sleep 302 & exit 0' &); sleep 0.2; exit 0"
    res = run(home, ["sh", "-c", helper], "--on-exit", "terminate")
    assert res.returncode == 0
    sid = only_session(home)
    cleanup += session_pids(sid)
    assert session_pids(sid) == []
    [surv] = [s for s in events(home, "survivor") if s["cmdline"] == ["sleep", "302"]]
    [start] = events(home, "session-start")
    assert surv["ppid"] == start["pid"]  # re-parented to the supervisor (subreaper)
    assert surv["action"] == "terminated"
    assert surv["pid"] in {r["pid"] for r in events(home, "reaped")}


def test_helper_ignoring_sigterm_is_killed_after_grace(home: Home, cleanup: list[int]) -> None:
    helper = "sh -c 'trap \"\" TERM; sleep 303' & sleep 0.3; exit 0"
    res = run(home, ["sh", "-c", helper], "--on-exit", "terminate", "--grace", "0.5")
    assert res.returncode == 0
    sid = only_session(home)
    cleanup += session_pids(sid)
    assert session_pids(sid) == []
    actions = {" ".join(s["cmdline"]): s["action"] for s in events(home, "survivor")}
    assert actions["sleep 303"] == "killed"
    [end] = events(home, "session-end")
    assert end["terminated"] is True


def test_absolute_path_shell_is_observed(home: Home, interpreter: str) -> None:
    install(home, ["git"], interpreter)
    res = run(home, ["sh", "-c", "/bin/sh -c 'sleep 1'; git --version >/dev/null"])
    assert res.returncode == 0
    sid = only_session(home)
    observed = events(home, "observed", sid)
    shells = [o for o in observed if o["cmdline"] == ["/bin/sh", "-c", "sleep 1"]]
    assert len(shells) == 1, [(o["pid"], o["cmdline"]) for o in observed]
    [sh] = shells
    assert sh["exe"] in ("/usr/bin/dash", "/bin/dash", "/usr/bin/bash", "/bin/bash")
    assert isinstance(sh["start"], int) and isinstance(sh["parent_start"], int)
    assert sh["uid"] is not None and sh["cwd"]
    # The shimmed git is not also "observed": it has its exec record.
    [git] = [r for r in home.execs() if r.shim == "git"]
    assert git.session == sid
    assert (git.pid, git.start) not in {(o["pid"], o["start"]) for o in observed}


def test_non_utf8_argument_keeps_its_bytes(home: Home) -> None:
    res = run(home, ["sh", "-c", "sleep 1", "x", "\udcff\udcfeok"])
    assert res.returncode == 0
    [obs] = [o for o in events(home, "observed", only_session(home)) if o["cmdline"][0] == "sh"]
    assert obs["cmdline"] == ["sh", "-c", "sleep 1", "x", "\ufffd\ufffdok"]
    assert obs["cmdline_b64"] == {"4": "//5vaw=="}
