"""A command never outlives its supervisor: a SIGKILLed `mcpshim run` takes the family with it
(supervise.watcher), and a session that ends normally leaves what it reports alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from mcpshim.proc.procinfo import read_stat, start_ticks
from mcpshim.trace.run import tracer_of
from tests.fixtures.home import Home
from tests.fixtures.runhelp import events, kill_all, only_session, poll, run_argv, session_pids

# In the command's group: sleep 300 (default SIGTERM), sleep 303 with an empty environment
# (found by its group only), and the command itself, which ignores SIGTERM (the ignore
# survives its exec) and dies only by SIGKILL after the grace period. Out of the group:
# sleep 301, in a session of its own (found by the session id in its environment).
FAMILY = "sleep 300 & setsid sleep 301 & env -i sleep 303 & trap '' TERM; exec sleep 302"
CMDLINES = {f"sleep\0{n}\0".encode() for n in (300, 301, 302, 303)}


Leftovers = list[tuple[int, int | None]]
MCPSHIM = [sys.executable, "-m", "mcpshim"]


@pytest.fixture
def cleanup() -> Iterator[Leftovers]:
    """(pid, start) of what a failing test would leave running; killed while the same."""
    procs: Leftovers = []
    yield procs
    kill_all([pid for pid, start in procs if start is not None and start_ticks(pid) == start])


def _keep(procs: Leftovers, pids: Iterable[int]) -> None:
    procs.extend((p, start_ticks(p)) for p in pids)


def _members(sid: str, pgid: int) -> set[int]:
    """The session's live processes: by the session id, or by the command's group."""
    found = set(session_pids(sid))
    for name in os.listdir("/proc"):
        st = read_stat(int(name)) if name.isdigit() else None
        if st is not None and st.pgid == pgid and st.state != "Z":
            found.add(st.pid)
    return found


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _kill_mid_session(home: Home, cleanup: Leftovers, mode: list[str]) -> str:
    """`run` SIGKILLed once its whole family runs; its session id, once the family is gone."""
    argv = run_argv(home, ["sh", "-c", FAMILY], *mode, "--grace", "1")
    proc = subprocess.Popen(argv, env=home.env, stdin=subprocess.PIPE)
    try:
        poll(lambda: home.loc.log_file.exists() and events(home, "session-start"), "start")
        [start] = events(home, "session-start")
        sid, pgid = only_session(home), start["child_pid"]

        def everyone() -> set[int] | None:
            pids = _members(sid, pgid)
            _keep(cleanup, pids)
            return pids if {_cmdline(p) for p in pids} >= CMDLINES else None

        family = poll(everyone, "the whole family to run")
        proc.kill()  # SIGKILL: the supervisor writes nothing more, closes nothing itself
        proc.wait(timeout=60)
        # Gone, the one that ignores SIGTERM after the grace period.
        poll(lambda: not (family & _members(sid, pgid)), "the family to end", 30)
        return sid
    finally:
        proc.kill()
        if proc.stdin:
            proc.stdin.close()


@pytest.mark.parametrize("mode", [[], ["--mcp"]], ids=["plain", "mcp"])
def test_a_killed_supervisor_takes_the_family_with_it(
    home: Home, cleanup: Leftovers, mode: list[str]
) -> None:
    _kill_mid_session(home, cleanup, mode)


def test_the_watcher_records_how_a_killed_session_ended(home: Home, cleanup: Leftovers) -> None:
    sid = _kill_mid_session(home, cleanup, [])
    [end] = poll(lambda: events(home, "session-end"), "the watcher's session-end")
    assert end["session"] == sid and end["cause"] == "supervisor-lost"
    assert end["exit_status"] is None and end["duration_s"] > 0
    assert end["survivors"] >= 4 and end["terminated"] is True
    loc = ["--dir", str(home.loc.shim_dir), "--log-dir", str(home.loc.log_dir)]
    out = subprocess.run(
        [*MCPSHIM, "sessions", *loc, "--format", "json"],
        env=home.env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    [s] = json.loads(out.stdout)["sessions"]
    assert s["duration_s"] == end["duration_s"] and s["cause"] == "supervisor-lost"
    assert not s["running"] and s["survivors"] == end["survivors"]
    text = subprocess.run(
        [*MCPSHIM, "sessions", *loc], env=home.env, capture_output=True, text=True, check=True
    ).stdout
    [line] = [ln for ln in text.splitlines() if ln.startswith(sid)]
    assert " lost " in line and " - " not in line.split(sid, 1)[1][:40]


def _watcher_of(supervisor: int) -> int | None:
    for name in os.listdir("/proc"):
        st = read_stat(int(name)) if name.isdigit() else None
        if st is not None and st.ppid == supervisor and st.comm == b"mcpshim-watch":
            return st.pid
    return None


@pytest.mark.parametrize("mode", [[], ["--mcp"]], ids=["plain", "mcp"])
def test_a_finished_session_leaves_its_survivors_alone(
    home: Home, cleanup: Leftovers, tmp_path: Path, mode: list[str]
) -> None:
    # --on-exit report: the supervisor stands the watcher down and reaps it before it
    # returns; the watcher is mcpshim's own, never a member of the family.
    go = tmp_path / "go"
    line = f"sleep 300 & until [ -e {go} ]; do sleep 0.01; done"
    argv = run_argv(home, ["sh", "-c", line], *mode, "--grace", "0.2")
    proc = subprocess.Popen(argv, env=home.env, stdin=subprocess.PIPE)
    try:
        watcher = poll(lambda: _watcher_of(proc.pid), "the watcher")
    finally:
        go.touch()
    try:
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        if proc.stdin:
            proc.stdin.close()
    [surv] = events(home, "survivor")
    _keep(cleanup, [surv["pid"]])
    assert not os.path.exists(f"/proc/{watcher}")  # reaped
    time.sleep(1.0)  # well past the grace a watcher would give it
    # Traced (the default), the survivor keeps the session's tracer (detaching would make
    # its fork/exec fail), which carries the session id too; nothing else is left.
    left = set(session_pids(only_session(home)))
    tracer = {s["tracer_pid"] for s in events(home, "trace-summary")}
    assert tracer == ({tracer_of(surv["pid"])} if tracer else set())
    assert left - tracer == {surv["pid"]}
    kinds = ("observed", "survivor", "reaped")
    assert watcher not in [e["pid"] for k in kinds for e in events(home, k)]


WATCHER_ENDS = """
import os, sys, time
from mcpshim.proc.procinfo import read_stat
from mcpshim.supervise.watcher import Watcher
w = Watcher("S", 1.0)
pid = w.start()
w.finish(done=True, wait=False)  # run's exit no longer waits for it here
deadline = time.monotonic() + 10
while (st := read_stat(pid)) is not None and st.state != "Z" and time.monotonic() < deadline:
    time.sleep(0.005)
print(st.state if st else "gone")
w.reap()
print("reaped" if read_stat(pid) is None else "still there")
w.reap()  # once is enough: a second is nothing
"""


def test_a_watcher_told_the_session_is_over_ends_unwaited_and_is_reaped_later(
    home: Home,
) -> None:
    done = subprocess.run([sys.executable, "-c", WATCHER_ENDS], capture_output=True, text=True,
                          timeout=30, env=home.env, check=True)  # fmt: skip
    assert done.stdout.split() == ["Z", "reaped"], done.stderr
