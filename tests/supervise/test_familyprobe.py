"""FamilyProbe: the live descendants each recorded response carries, found without reading
every process on the machine twice."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from mcpshim.proc.procinfo import LINUX, read_stat, start_ticks
from mcpshim.supervise.relayed import FamilyProbe

TREE = "sleep 30 & sleep 30 & echo ready; wait"


def _tree() -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(["sh", "-c", TREE], stdout=subprocess.PIPE)
    assert proc.stdout and proc.stdout.readline() == b"ready\n"
    return proc


def _kids(pid: int) -> list[int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        kids = [
            int(n)
            for n in os.listdir("/proc")
            if n.isdigit() and (st := read_stat(int(n))) is not None and st.ppid == pid
        ]
        if len(kids) == 2:
            return sorted(kids)
        time.sleep(0.01)
    raise AssertionError("the sleeps never showed up")


@pytest.mark.skipif(not LINUX, reason="the outsider cache is the Linux path")
def test_probe_finds_the_family_and_remembers_outsiders() -> None:
    probe = FamilyProbe(os.getpid())
    proc = _tree()
    try:
        sleeps = _kids(proc.pid)
        expect = sorted((p, start_ticks(p)) for p in [proc.pid, *sleeps])
        assert probe() == expect
        # pid 1 and this process's own ancestors can never join: proven outsiders.
        assert 1 in probe.outsiders and os.getppid() in probe.outsiders
        assert proc.pid not in probe.outsiders and os.getpid() not in probe.outsiders
        # A process that starts later is found, whatever pid it got.
        late = subprocess.Popen(["sleep", "30"])
        try:
            assert probe() == sorted([*expect, (late.pid, start_ticks(late.pid))])
        finally:
            late.kill()
            late.wait()
        # Excluded pids (mcpshim's own helpers) are left out, their children are not.
        only_sleeps = FamilyProbe(os.getpid(), lambda: {proc.pid})
        assert only_sleeps() == sorted((p, start_ticks(p)) for p in sleeps)
    finally:
        for p in _kids(proc.pid):
            os.kill(p, 9)
        proc.wait()
    assert probe() == []
