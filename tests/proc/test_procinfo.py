"""The one /proc/PID/stat parser (procinfo.parse_stat), over real child processes: the
tracer's "is it gone" and the relay's "is the recorder working" read it too."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from mcpshim.proc.procinfo import cpu_seconds, parse_stat, read_stat
from mcpshim.trace.run import is_gone

# a name that would fool a parser splitting at the first ")" or on blanks
_NAME = "x) Z 1 (y"
_RENAME_AND_SLEEP = f"open('/proc/self/comm', 'w').write({_NAME!r}); import sys; sys.stdin.read()"


def _wait_for(pid: int, name: bytes) -> None:
    deadline = time.monotonic() + 10
    while (st := read_stat(pid)) is None or st.comm != name or st.state != "S":
        assert time.monotonic() < deadline, st
        time.sleep(0.01)


def test_a_name_with_blanks_and_parentheses_is_read_whole() -> None:
    child = subprocess.Popen([sys.executable, "-c", _RENAME_AND_SLEEP], stdin=subprocess.PIPE)
    try:
        _wait_for(child.pid, _NAME.encode())
        st = read_stat(child.pid)
        assert st is not None
        assert (st.comm, st.state, st.ppid) == (_NAME.encode(), "S", os.getpid())
        assert not st.gone and not is_gone(child.pid)
    finally:
        child.kill()
        child.wait()


def test_cpu_time_is_what_the_process_used() -> None:
    burn = (
        "import sys, time\nend = time.process_time() + 0.32\n"
        "while time.process_time() < end: pass\nsys.stdin.read()"
    )
    child = subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE)
    try:
        _wait_for(child.pid, os.path.basename(sys.executable).encode()[:15])
        used = cpu_seconds(child.pid)  # in clock ticks: up to one tick (10 ms) short of it
        assert used is not None and used >= 0.3
    finally:
        child.kill()
        child.wait()
    assert cpu_seconds(child.pid) is None  # reaped


def test_a_zombie_is_gone_and_a_reaped_process_has_no_stat() -> None:
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while not is_gone(child.pid):  # exited, not reaped: still in /proc, as Z
        assert time.monotonic() < deadline
        time.sleep(0.01)
    st = read_stat(child.pid)
    assert st is not None and st.state == "Z" and st.gone
    child.wait()
    assert read_stat(child.pid) is None and is_gone(child.pid)


def test_a_line_cut_short_is_no_stat() -> None:
    with open(f"/proc/{os.getpid()}/stat", "rb") as fh:
        line = fh.read()
    assert parse_stat(os.getpid(), line) is not None
    close = line.rfind(b")")
    ten_fields = line[: close + 2] + b" ".join(line[close + 2 :].split()[:10])
    for cut in (b"", line[:close], ten_fields):
        assert parse_stat(os.getpid(), cut) is None
