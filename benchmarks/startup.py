"""Start-up of the commands a user runs most often, against `python -c "import click"`.

Runs, with this interpreter and in this process's run (interleaved, so the load is shared
alike): `python -c "import click"` (the floor: an interpreter and the one dependency every
command needs), `mcpshim --help`, `mcpshim review --help` and `mcpshim sessions` on an empty
log. Prints each one's best and median wall time over the runs, and its best over the floor's
best, with the load average before and after.

    python benchmarks/startup.py [--runs N]

Target (issue 31's acceptance): `mcpshim --help` and `mcpshim review --help` at most 3x the
floor.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from throwaway import throwaway_home


def _wall(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.stderr.write(done.stderr.decode(errors="replace"))
        raise SystemExit(f"{' '.join(argv[3:])}: exit {done.returncode}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mcpshim-startup-"))
    log = home / "log"
    log.mkdir()
    (log / "exec.log").touch()
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "cfg")}
    cli = [sys.executable, "-m", "mcpshim"]
    cases = {
        "import click": [sys.executable, "-c", "import click"],
        "mcpshim --help": [*cli, "--help"],
        "mcpshim review --help": [*cli, "review", "--help"],
        "mcpshim sessions (empty log)": [*cli, "sessions", "--log-dir", str(log), "--dir",
                                         str(home / "shims")],
    }  # fmt: skip
    load = os.getloadavg()[0]
    for argv in cases.values():  # warm the file cache and the bytecode
        _wall(argv, env)
    walls: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, argv in cases.items():
            walls[name].append(_wall(argv, env))
    floor = min(walls["import click"])
    out = {
        name: {"best_s": round(min(w), 4), "median_s": round(statistics.median(w), 4),
               "ratio": round(min(w) / floor, 2)}
        for name, w in walls.items()
    }  # fmt: skip
    print(json.dumps({"runs": args.runs, "load": [round(load, 2), round(os.getloadavg()[0], 2)],
                      **out}, indent=1))  # fmt: skip


if __name__ == "__main__":
    throwaway_home()
    main()
