"""Added cost of one exec through an mcpshim shim, against baselines run in the same process.

Runs `git --version` N times each way, interleaved (direct, the dash `exec` floor, the
article's wrapper, the mcpshim shim), and prints the median wall time per exec, the median
added over direct, and the ratio. Shims and logs live in a throwaway directory.

    python benchmarks/shim_overhead.py [-n 400] [--command git --version]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcpshim.paths import Locations
from mcpshim.shim import install, targets

ARTICLE_WRAPPER = """#!/bin/sh
printf '%s pid=%s ppid=%s cwd=%s argv=%s\\n' \\
  "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$$" "$PPID" "$(pwd)" "$*" \\
  >> "{log}"
exec {target} "$@"
"""


def spawn_wait(argv: list[str], devnull: int) -> float:
    t0 = time.perf_counter()
    pid = os.posix_spawn(
        argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1)]
    )
    os.waitpid(pid, 0)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=400, help="runs per variant (>= 300)")
    ap.add_argument("--command", nargs="+", default=["git", "--version"])
    opts = ap.parse_args()
    name, *args = opts.command
    target = shutil.which(name, path=":".join(targets.trusted_search_path()))
    if target is None:
        print(f"{name} not found", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="mcpshim-bench-") as tmp:
        root = Path(tmp)
        loc = Locations(root / "shims", root / "log")
        install.install(loc, [name], {})
        wrapper = root / "wrapper"
        wrapper.write_text(ARTICLE_WRAPPER.format(log=root / "article.log", target=target))
        wrapper.chmod(0o755)
        variants = {
            "direct": [target, *args],
            "dash -c exec (floor)": ["/bin/sh", "-c", f'exec {target} "$@"', name, *args],
            "article wrapper": [str(wrapper), *args],
            "mcpshim shim": [str(loc.shim_dir / name), *args],
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        devnull = os.open(os.devnull, os.O_WRONLY)
        for argv in variants.values():  # warm caches once
            spawn_wait(argv, devnull)
        for _ in range(opts.n):
            for key, argv in variants.items():
                times[key].append(spawn_wait(argv, devnull))
        os.close(devnull)
        base = statistics.median(times["direct"])
        print(f"{' '.join(opts.command)}: {opts.n} runs each, interleaved; median per exec")
        print(f"{'variant':24} {'ms':>8} {'added ms':>9} {'ratio':>6}")
        for key, ts in times.items():
            med = statistics.median(ts)
            print(f"{key:24} {med * 1e3:8.3f} {(med - base) * 1e3:9.3f} {med / base:6.2f}")
        records = loc.log_file.read_bytes().count(b"\0\n")
        print(f"records written by the shim: {records} (expected {opts.n + 1})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
