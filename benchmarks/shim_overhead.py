"""Added cost of one exec through an mcpshim shim, against baselines run in the same process.

Runs `git --version` N times each way, interleaved in a new random order each round
(direct, the dash `exec` floor, the article's wrapper, the mcpshim shim), and prints the
median wall time per exec, the median added over direct, and the ratio, then the same
for CPU time (user + system of the child, from wait4), which load moves less. Shims and
logs live in a throwaway directory. With --against REV, the shim as the commit REV of this
repository wrote it runs in the same rounds (its `mcpshim install`, from `git archive`),
and the difference between the two is printed: how the shim's cost changed since REV, on
today's machine.

    python benchmarks/shim_overhead.py [-n 400] [--command git --version] [--against REV]
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
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


def spawn_wait(argv: list[str], devnull: int) -> tuple[float, float]:
    """Wall and CPU seconds of one run."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(
        argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1)]
    )
    _, _, usage = os.wait4(pid, 0)
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def install_at(rev: str, root: Path, name: str, target: str) -> Path:
    """The shim for name as the commit rev wrote it (its own `mcpshim install`)."""
    repo = Path(__file__).resolve().parents[1]
    tar = subprocess.run(
        ["git", "-C", str(repo), "archive", rev, "src", "shims"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(root / "src", filter="data")
    env = {**os.environ, "PYTHONPATH": str(root / "src" / "src")}
    shims, log = root / "shims", root / "log"
    done = subprocess.run(
        [sys.executable, "-m", "mcpshim", "install", "--dir", str(shims), "--log-dir", str(log),
         "--target", f"{name}={target}", name],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"install at {rev} failed: {done.stderr.strip()}")
    return shims / name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=400, help="runs per variant (>= 300)")
    ap.add_argument("--command", nargs="+", default=["git", "--version"])
    ap.add_argument("--against", metavar="REV", help="also the shim of this commit")
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
        if opts.against:
            old = install_at(opts.against, root / "against", name, target)
            variants[f"shim at {opts.against}"[:24]] = [str(old), *args]
        times: dict[str, list[float]] = {k: [] for k in variants}
        cpu: dict[str, list[float]] = {k: [] for k in variants}
        devnull = os.open(os.devnull, os.O_WRONLY)
        for argv in variants.values():  # warm caches once
            spawn_wait(argv, devnull)
        order = list(variants.items())
        for _ in range(opts.n):
            random.shuffle(order)  # no variant always runs right after another
            for key, argv in order:
                wall, used = spawn_wait(argv, devnull)
                times[key].append(wall)
                cpu[key].append(used)
        os.close(devnull)
        print(f"{' '.join(opts.command)}: {opts.n} runs each, interleaved; median per exec")
        for label, table in (("wall", times), ("cpu", cpu)):
            base = statistics.median(table["direct"])
            print(f"{label + ' time':24} {'ms':>8} {'added ms':>9} {'ratio':>6}")
            for key, ts in table.items():
                med = statistics.median(ts)
                print(f"{key:24} {med * 1e3:8.3f} {(med - base) * 1e3:9.3f} {med / base:6.2f}")
        if opts.against:
            old_key = list(variants)[-1]
            for label, table in (("wall", times), ("cpu", cpu)):
                d = statistics.median(table["mcpshim shim"]) - statistics.median(table[old_key])
                print(f"this shim minus the shim at {opts.against}, {label}: {d * 1e3:+.3f} ms")
        records = loc.log_file.read_bytes().count(b"\0\n")
        print(f"records written by the shim: {records} (expected {opts.n + 1})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
