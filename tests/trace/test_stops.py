"""A traced command's threads and children run free between the syscalls strace wants.

strace resumes a new tracee with a stop at every syscall until its first seccomp stop; a
thread that never execs would pay two ptrace stops per syscall for its whole life. Each stop
is a voluntary context switch of the tracee, which /proc counts exactly: no timing here.
"""

from __future__ import annotations

import json
import platform
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fixtures.home import Home
from tests.fixtures.runhelp import needs_trace, run

CALLS = 2000

# Each part makes CALLS getppid()s and reports how often it was switched out meanwhile:
# the main thread (woken by the traced execve), a thread, a forked child, and a child made
# by a raw clone (no glibc fork handlers, so no set_robust_list) that calls sigaltstack as
# a Go thread does when it starts.
WORKLOAD = textwrap.dedent(
    f"""
    import ctypes, json, os, signal, threading

    def switches():
        with open("/proc/thread-self/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
        raise SystemExit("no voluntary_ctxt_switches")

    def work():
        before = switches()
        for _ in range({CALLS}):
            os.getppid()
        return switches() - before

    out = {{"main": work()}}
    t = threading.Thread(target=lambda: out.__setitem__("thread", work()))
    t.start()
    t.join()

    def child(make, tag, setup=lambda: None):
        r, w = os.pipe()
        pid = make()
        if pid == 0:
            setup()
            os.write(w, str(work()).encode())
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        out[tag] = int(os.read(r, 64))

    libc = ctypes.CDLL(None, use_errno=True)
    child(os.fork, "fork")
    raw = lambda: libc.syscall(56, int(signal.SIGCHLD), 0, 0, 0, 0)  # x86_64 clone
    child(raw, "raw clone", lambda: libc.sigaltstack(None, ctypes.create_string_buffer(64)))
    print(json.dumps(out))
    """
)


@needs_trace
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the raw clone is x86_64's")
def test_threads_and_children_are_not_stopped_at_every_syscall(home: Home, tmp_path: Path) -> None:
    script = tmp_path / "work.py"
    script.write_text(WORKLOAD)
    done = run(home, [sys.executable, str(script)], "--trace", capture_output=True)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert set(got) == {"main", "thread", "fork", "raw clone"}
    # Stopped at each syscall, a part is switched out twice per call (4,000 and more);
    # running free, a few times at most (the scheduler, a page fault's I/O).
    assert all(n < CALLS // 10 for n in got.values()), got
