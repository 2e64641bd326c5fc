"""Stat lines read through held descriptors (the sampler's per-tick read), over real
child processes of this test."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

from mcpshim.log import execlog
from mcpshim.proc.procinfo import Stat, read_stat
from mcpshim.proc.statfds import LastPid, StatFds
from mcpshim.supervise.sampler import Sampler


def test_a_held_stat_file_follows_its_process_and_lets_go_when_it_is_gone() -> None:
    fds = StatFds()
    child = subprocess.Popen(["sleep", "30"])
    try:
        # asleep: its line no longer changes (a child still starting is R, its times tick)
        deadline = time.monotonic() + 10
        while (st := read_stat(child.pid)) is None or st.state != "S" or st.comm != b"sleep":
            assert time.monotonic() < deadline, st
            time.sleep(0.01)
        first = fds.read(child.pid)
        assert first is not None and first == read_stat(child.pid)
        assert fds.held == 1
        # a line that did not change is not parsed again: the very same Stat comes back
        assert fds.read(child.pid) is first
    finally:
        child.kill()
        child.wait()  # reaped: the descriptor's process is gone
    assert fds.read(child.pid) is None
    assert fds.held == 0
    fds.close()


def test_an_exec_changes_the_line_read_through_the_same_descriptor() -> None:
    fds = StatFds()
    child = subprocess.Popen(["sh", "-c", "sleep 0.3; exec sleep 30"])
    try:
        before = fds.read(child.pid)
        assert before is not None and before.comm == b"sh"
        deadline = time.monotonic() + 10
        after: Stat | None = before
        while after is not None and after.comm == b"sh" and time.monotonic() < deadline:
            time.sleep(0.05)
            after = fds.read(child.pid)
        assert after is not None and after.comm == b"sleep"
        assert (after.pid, after.start) == (before.pid, before.start)  # one process
        assert after.image != before.image
    finally:
        child.kill()
        child.wait()
        fds.close()


def test_past_its_limit_a_reader_opens_and_closes_each_time() -> None:
    fds = StatFds(limit=1)
    kids = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]
    try:
        stats = [fds.read(k.pid) for k in kids]
        assert [s.pid if s else None for s in stats] == [k.pid for k in kids]
        assert fds.held == 1
        fds.keep_only({kids[2].pid})
        assert fds.held == 0
    finally:
        for k in kids:
            k.kill()
            k.wait()
        fds.close()


def test_an_idle_family_still_shows_a_new_child_and_an_exec() -> None:
    got: list[tuple[str, dict[str, Any]]] = []
    s = Sampler("t", execlog.current_boot_id(), os.getpid(), lambda k, p: got.append((k, p)), None)
    a = subprocess.Popen(["sh", "-c", "read x; exec sleep 30"], stdin=subprocess.PIPE)
    b = None
    try:
        for _ in range(4):  # idle ticks: the survey finds the same lines as last time
            s.tick()
        assert a.pid in s.members
        b = subprocess.Popen(["sleep", "30"])
        s.tick()
        assert b.pid in s.members
        assert a.stdin is not None
        a.stdin.write(b"go\n")
        a.stdin.flush()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            s.tick()
            if s.members[a.pid].stat.comm == b"sleep":
                break
            time.sleep(0.05)
        s.tick()
        s.tick()
        cmdlines = [p["cmdline"] for k, p in got if k == "observed" and p["pid"] == a.pid]
        assert cmdlines == [["sh", "-c", "read x; exec sleep 30"], ["sleep", "30"]]
        # a member that ends is gone from the family at the next tick, new pids or not
        b.kill()
        b.wait()
        s.tick()
        assert b.pid not in s.members and a.pid in s.members
    finally:
        for p in (a, b):
            if p is not None:
                p.kill()
                p.wait()
        s.close()


def test_the_last_pid_handed_out_moves_when_a_process_is_made() -> None:
    last = LastPid()
    before = last.read()
    assert isinstance(before, int) and before > 0
    subprocess.run(["true"], check=True)
    after = last.read()
    assert after is not None and after != before
    last.close()
    assert last.read() is None
