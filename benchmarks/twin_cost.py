"""What each twin path earns over the plain one on the whole-log benchmark (issue 31 item 4).

On review_scale.py's log (default 1,000,000 records; --keep DIR --reuse reads one kept
there), each in a child process, in a new random order each round:

- `tree` and `review` as they are;
- the same with one CPU (`os.cpu_count` says 1): tree's forked printer and review's split
  across two processes off, one process doing it all;
- the plain paths: `tree` read as records (execlog), each its image (the process model,
  family.model), one `Forest` of nodes (family.tree) printed by `render_tree_text`; review
  as records through `engine.review` in one process (no rows, no split);
- the floor of review_scale.py (rows read and linked in one process).

Prints each one's median wall and CPU time, and each twin's gain: the plain path's CPU
(and wall) over the twin's, the share of the command's CPU it saves.

    python benchmarks/twin_cost.py [--records N] [--keep DIR [--reuse]] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from review_scale import FLOOR, generate, measure
from throwaway import throwaway_home

ONE_CPU = "import os, sys; os.cpu_count = lambda: 1; from mcpshim.cli import main; " \
    "main(sys.argv[1:])"  # fmt: skip
PLAIN_TREE = """
import sys
from pathlib import Path
from mcpshim.family.model import Assembler
from mcpshim.family.tree import build_forest
from mcpshim.log import execlog
from mcpshim.paths import Locations
from mcpshim.render.text import render_tree_text
loc = Locations(Path(sys.argv[1]), Path(sys.argv[2]))
model = Assembler()
images = [img for rec in execlog.iter_records(loc, []) for img in model.feed(rec)]
images += model.finish()
sys.stdout.write(render_tree_text(build_forest(images), {"log": str(loc.log_file)}))
"""
PLAIN_REVIEW = """
import sys
from pathlib import Path
from mcpshim.log import execlog
from mcpshim.paths import Locations
from mcpshim.review.engine import review
from mcpshim.review.policy import default_policy
loc = Locations(Path(sys.argv[1]), Path(sys.argv[2]))
print(len(review(execlog.iter_records(loc, []), policy=default_policy()).findings))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="mcpshim-twins-"))
    log_dir, shim_dir = base / "log", base / "shims"
    if not (args.reuse and (log_dir / "exec.log").exists()):
        generate(log_dir, shim_dir, args.records)
    where = ["--dir", str(shim_dir), "--log-dir", str(log_dir)]
    py, cli = sys.executable, [sys.executable, "-m", "mcpshim"]
    runs = {
        "tree": [*cli, "tree", *where],
        "tree, one CPU (no forked printer)": [py, "-c", ONE_CPU, "tree", *where],
        "tree, plain (records, Forest)": [py, "-c", PLAIN_TREE, str(shim_dir), str(log_dir)],
        "review": [*cli, "review", *where, "--format", "json"],
        "review, one CPU (no split)": [py, "-c", ONE_CPU, "review", *where, "--format", "json"],
        "review, plain (records)": [py, "-c", PLAIN_REVIEW, str(shim_dir), str(log_dir)],
        "floor": [py, "-c", FLOOR, str(log_dir / "exec.log")],
    }
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name in random.sample(list(runs), len(runs)):
            u = measure(runs[name])
            assert u.code in (0, 1), f"{name} exited {u.code}"
            got[name].append((u.wall, u.cpu))
    med = {n: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for n, v in got.items()}  # fmt: skip
    for name, (wall, cpu) in med.items():
        print(f"{name:36} {wall:7.2f} s  CPU {cpu:6.2f} s")
    pairs = [(name.split(",")[0], name) for name in runs if "," in name]
    for twin, plain in pairs:
        (tw, tc), (pw, pc) = med[twin], med[plain]
        print(f"{twin} against {plain}: CPU {(pc - tc) / pc * 100:+.0f} % saved by the twin, "
              f"wall {(pw - tw) / pw * 100:+.0f} %")  # fmt: skip
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    throwaway_home()
    main()
