"""Cost of one session's commands on a large log (issue 31: cost follows the session).

Writes the log of benchmarks/sessions_scale.py (default 1,000,000 records, 4 segments
rotated every 64 MiB, about 200 `run --mcp` sessions whose tool calls run the families of
benchmarks/review_scale.py), brings the session index up to date (`mcpshim sessions`,
timed: what a cold index costs once), and picks the session nearest --execs execs (default
1,500). Then runs, each in a child process, in a new random order each round:

- `review --session S`, `tree --session S`, `approve --session S --yes` (a fresh lock each
  time), `report --session S`, `log --session S`: each reads the session's part of the log;
- the anchor `mcpshim review --help` (the interpreter, the CLI, review's imports);
- approve's own work that no log holds, cold: the identities of the executables the
  session ran (`contract.identity`: SHA-256 of each, one dpkg-query; node alone is 99 MB),
  looked up in a child of its own with no identity cache, as a first approve on a machine
  finds them (the approve rounds keep theirs in the throwaway home's cache, as a user's
  second approve does);
- with --whole, each of the first three once more as it was before, reading the whole log
  (log.scope switched off in the same child).

Prints per command the median wall and CPU time over the rounds and each one's ratio to the
anchor's (the issue's bound: at most 3x), and the load average before and after.

    python benchmarks/session_scale.py [--records N] [--execs N] [--rounds N]
        [--keep DIR [--reuse]] [--whole]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from review_scale import TARGETS, measure
from sessions_scale import generate
from throwaway import throwaway_home

LOOKUP = "import sys; from mcpshim.contract.identity import Identities; " \
    "Identities().lookup(sys.argv[1:])"  # fmt: skip
WHOLE = "import sys; from mcpshim.log import scope; from mcpshim.cli import main; " \
    "scope.ENABLED = False; main(sys.argv[1:])"  # fmt: skip


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _spans(log_dir: Path, session: str) -> str:
    """Which segments hold the session's records (from the index)."""
    doc = json.loads((log_dir / "index" / "sessions.json").read_bytes().partition(b"\n")[2])
    held = [e["name"] for e in doc["segments"] if e["spans"].get(session)]
    return ", ".join(held)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--execs", type=int, default=1_500, help="The session's size to pick.")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="Write the log here and keep it.")
    ap.add_argument("--reuse", action="store_true", help="With --keep: read the log there.")
    ap.add_argument("--whole", action="store_true", help="Also time the whole-log reads.")
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="mcpshim-session-"))
    log_dir, shim_dir = base / "log", base / "shims"
    if not (args.reuse and (log_dir / "exec.log").exists()):
        shutil.rmtree(log_dir, ignore_errors=True)
        t0 = time.perf_counter()
        size, segs = generate(log_dir, shim_dir, args.records)
        print(f"generated {args.records:,} records, {size / 1e6:.1f} MB in {segs} segments "
              f"in {time.perf_counter() - t0:.1f} s ({log_dir})")  # fmt: skip
    cli = [sys.executable, "-m", "mcpshim"]
    where = ["--dir", str(shim_dir), "--log-dir", str(log_dir)]
    print(f"load average {_load()}")
    had = (log_dir / "index" / "sessions.json").exists()
    u = measure([*cli, "sessions", *where])
    print(f"{'sessions (index ' + ('kept' if had else 'built') + ')':28} {u.wall:6.2f} s  "
          f"CPU {u.cpu:5.2f} s  peak RSS {u.rss:4.0f} MB")  # fmt: skip
    listed = json.loads(subprocess.run([*cli, "sessions", *where, "--format", "json"],
                                       capture_output=True, check=True).stdout)  # fmt: skip
    pick = min(listed["sessions"], key=lambda s: abs(s["execs"] - args.execs))
    sid = pick["id"]
    print(f"session {sid}: {pick['execs']} execs, {pick['tool_calls']} tool calls, "
          f"of {len(listed['sessions'])} sessions; records in {_spans(log_dir, sid)}")  # fmt: skip
    lock = base / "bench.lock"
    one = [*where, "--session", sid]
    runs = {
        "review --help": [*cli, "review", "--help"],
        "review --session": [*cli, "review", *one, "--format", "json"],
        "tree --session": [*cli, "tree", *one, "--format", "json"],
        "approve --session": [*cli, "approve", *one, "--yes", "--lock", str(lock)],
        "report --session": [*cli, "report", *one, "-o", "-", "--format", "md"],
        "log --session": [*cli, "log", *one, "--format", "json"],
        "identities, cold (approve's)": [sys.executable, "-c", LOOKUP,
                                   *sorted({t.decode() for t in TARGETS.values()})],
    }  # fmt: skip
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name in random.sample(list(runs), len(runs)):
            lock.unlink(missing_ok=True)
            u = measure(runs[name])
            assert u.code in (0, 1), f"{name} exited {u.code}"
            got[name].append((u.wall, u.cpu))
    wall0 = statistics.median(w for w, _ in got["review --help"])
    cpu0 = statistics.median(c for _, c in got["review --help"])
    for name, seen in got.items():
        wall, cpu = statistics.median(w for w, _ in seen), statistics.median(c for _, c in seen)
        bounded = name in ("review --session", "tree --session", "approve --session")
        print(
            f"{name:28} {wall:6.3f} s  CPU {cpu:6.3f} s  {wall / wall0:5.2f} x wall  "
            f"{cpu / cpu0:5.2f} x CPU of review --help" + "  (bound: 3 x)" * bounded
        )
    if args.whole:
        for name in ("review --session", "tree --session", "approve --session"):
            lock.unlink(missing_ok=True)
            argv = runs[name]
            u = measure([sys.executable, "-c", WHOLE, *argv[3:]])
            print(f"{name + ', whole log':28} {u.wall:6.3f} s  CPU {u.cpu:6.3f} s  "
                  f"{u.wall / wall0:5.2f} x wall  {u.cpu / cpu0:5.2f} x CPU")  # fmt: skip
    print(f"load average {_load()}")
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    throwaway_home()
    main()
