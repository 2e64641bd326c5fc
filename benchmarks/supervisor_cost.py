"""CPU the `mcpshim run` supervisor spends holding a family, as a share of one core.

Starts the real CLI (`mcpshim run --sample-ms 100`) over a family of N long-lived processes
(a shell that backgrounds N-1 sleeps), waits until every member has been seen, then reads
the supervisor's own CPU time (user + system, from the kernel) at the start and the end of
a measurement window and prints it as a percentage of one core. Between the two readings
the supervisor does nothing but sample: 10 ticks a second, each listing /proc and reading
one stat file per member (held open). The target (issue 20) is under 1 % of one core.

    python benchmarks/supervisor_cost.py [--family 50] [--sample-ms 100] [--seconds 20]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from throwaway import throwaway_home


def family_size(pid: int) -> int:
    try:
        return len(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return 0


def cpu_seconds(pid: int) -> float:
    """The process's CPU time so far: on Linux the scheduler's nanoseconds (schedstat, every
    thread), elsewhere user + system from psutil (in clock ticks: 10 ms steps)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        return (
            sum(int(Path(f"/proc/{pid}/task/{t}/schedstat").read_text().split()[0]) for t in tasks)
            / 1e9
        )
    except (OSError, ValueError):
        c = psutil.Process(pid).cpu_times()
        return c.user + c.system


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", type=int, default=50, help="processes in the family")
    ap.add_argument("--sample-ms", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=20.0, help="measurement window")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="mcpshim-bench-") as tmp:
        env = {**os.environ, "HOME": tmp, "XDG_DATA_HOME": f"{tmp}/data",
               "XDG_STATE_HOME": f"{tmp}/state"}  # fmt: skip
        shim_dir = Path(tmp) / "shims"
        script = f"i=1; while [ $i -lt {args.family} ]; do sleep 600 & i=$((i+1)); done; wait"
        argv = [sys.executable, "-m", "mcpshim", "run", "--dir", str(shim_dir),
                "--sample-ms", str(args.sample_ms), "--on-exit", "terminate", "--grace", "1",
                "--", "sh", "-c", script]  # fmt: skip
        sup = subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while family_size(sup.pid) < args.family:
                if time.monotonic() > deadline:
                    print("family did not come up", file=sys.stderr)
                    return 1
                time.sleep(0.1)
            time.sleep(3 * args.sample_ms / 1000 + 1)  # every member seen and decided
            c0, t0 = cpu_seconds(sup.pid), time.monotonic()
            time.sleep(args.seconds)
            c1, t1 = cpu_seconds(sup.pid), time.monotonic()
            members = family_size(sup.pid)
        finally:
            sup.send_signal(signal.SIGTERM)
            sup.wait(timeout=60)
    cpu = c1 - c0
    wall = t1 - t0
    share = 100 * cpu / wall
    ticks = wall * 1000 / args.sample_ms
    print(f"family: {members} processes; sampling every {args.sample_ms} ms; window {wall:.1f} s")
    print(f"supervisor CPU: {cpu * 1000:.0f} ms in {wall:.1f} s = {share:.2f} % of one core")
    print(f"per tick: {cpu * 1e6 / ticks:.0f} us (about {ticks:.0f} ticks)")
    print(f"target < 1 % of one core: {'met' if share < 1 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    throwaway_home()
    sys.exit(main())
