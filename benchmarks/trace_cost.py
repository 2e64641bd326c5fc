"""Added wall time per exec with `mcpshim run --trace`'s strace, against direct and shimmed runs.

One dash loop fork+execs `git --version` N times; the loop runs four ways, interleaved over
several rounds: direct, through the git shim, under the session's exact strace command line,
and shimmed under strace. Prints the median per exec of each and the added time per exec
(target: tracing adds at most 0.5 ms). Then the parse cost: turning the strace files of one
traced loop into log records, per exec.

    python benchmarks/trace_cost.py [-n 200] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcpshim.log import execlog
from mcpshim.paths import Locations
from mcpshim.shim import install, targets
from mcpshim.trace.records import exec_payloads
from mcpshim.trace.run import is_gone, tracer_of
from mcpshim.trace.strace import build_trace, read_output, strace_argv


def run_loop(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    tracer = 0
    if argv[0].endswith("strace"):
        while not tracer and proc.poll() is None:
            tracer = tracer_of(proc.pid) or 0
    proc.wait()
    while tracer and not is_gone(tracer):  # the trace is complete only when strace is done
        time.sleep(0.0005)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200, help="fork+execs per loop")
    ap.add_argument("--rounds", type=int, default=7)
    opts = ap.parse_args()
    strace = shutil.which("strace")
    git = shutil.which("git", path=":".join(targets.trusted_search_path()))
    if strace is None or git is None:
        print("needs strace and git", file=sys.stderr)
        return 2
    loop = f'i=0; while [ "$i" -lt {opts.n} ]; do git --version; i=$((i+1)); done'
    with tempfile.TemporaryDirectory(prefix="mcpshim-trace-bench-") as tmp:
        root = Path(tmp)
        loc = Locations(root / "shims", root / "log")
        install.install(loc, ["git"], {})
        plain = {"PATH": os.path.dirname(git) + ":/usr/bin:/bin"}
        shimmed = {"PATH": f"{loc.shim_dir}:{plain['PATH']}"}
        output = root / "strace.out"
        traced = strace_argv(strace, str(output), ["/bin/sh", "-c", loop])
        variants: dict[str, tuple[list[str], dict[str, str]]] = {
            "direct": (["/bin/sh", "-c", loop], plain),
            "shimmed": (["/bin/sh", "-c", loop], shimmed),
            "traced": (traced, plain),
            "traced + shimmed": (traced, shimmed),
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        for argv, env in variants.values():  # warm caches
            run_loop(argv, env)
        for _ in range(opts.rounds):
            for key, (argv, env) in variants.items():
                output.unlink(missing_ok=True)
                times[key].append(run_loop(argv, env) / opts.n)
        # Parse cost, on the files of the last (traced + shimmed) loop.
        t0 = time.perf_counter()
        trace = build_trace(
            read_output(output), 0, b"/", None, None, execlog.now_anchor(), execlog.CLK_TCK
        )
        n_records = sum(1 for _ in exec_payloads(trace, "bench", "", {}))
        parse = (time.perf_counter() - t0) / opts.n
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{opts.n} fork+execs of `git --version` from a dash loop; median of {opts.rounds}")
    print(f"{'variant':18} {'ms/exec':>8} {'added ms/exec':>14}")
    for key, m in med.items():
        ref = med["shimmed"] if key == "traced + shimmed" else med["direct"]
        col = "" if key == "direct" else f"{(m - ref) * 1e3:14.3f}"
        print(f"{key:18} {m * 1e3:8.3f} {col}")
    print("(shimmed is against direct; traced against direct; traced + shimmed against shimmed)")
    added = (med["traced"] - med["direct"]) * 1e3
    verdict = "within" if added <= 0.5 else "ABOVE"
    print(f"tracing adds {added:.3f} ms per exec: {verdict} the 0.5 ms target")
    print(f"parsing the trace into {n_records} records: {parse * 1e3:.3f} ms per exec")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
