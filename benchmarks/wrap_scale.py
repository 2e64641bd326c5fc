"""Scale of `mcpshim wrap-config --all` over a config with many servers.

Writes a VS Code mcp.json with N stdio servers (each with args, most with env, one in ten
with a comment) and runs `mcpshim wrap-config FILE --all` on it in a child
process, for a small N (the baseline) and larger ones. Prints wall and CPU time and the CPU
cost per server as a ratio to the baseline's: linear work keeps the ratio near 1, quadratic
work makes it grow with N (before the fix: 4,000 servers 11.6 s, 20,000 over 60 s).

    python benchmarks/wrap_scale.py [--sizes 1000,4000,20000]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from throwaway import throwaway_home


def config_text(n: int) -> str:
    """A VS Code mcp.json (comments and trailing commas allowed), indented as people write it."""
    lines = ["{", "  // servers for the scale benchmark", '  "servers": {']
    for i in range(n):
        env = f', "env": {{"TOKEN_{i}": "${{env:T{i}}}"}}' if i % 3 else ""
        comment = f"  // server {i}" if i % 10 == 0 else ""
        lines.append(
            f'    "s{i}": {{"command": "npx", "args": ["-y", "pkg-{i}@1.0.0"]{env}}},{comment}'
        )
    lines += ["  },", "}", ""]
    return "\n".join(lines)


def run_once(n: int, tmp: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one run; CPU is what a loaded machine does not inflate."""
    d = tmp / f"n{n}" / ".vscode"
    d.mkdir(parents=True)
    path = d / "mcp.json"
    path.write_text(config_text(n))
    shim_dir = tmp / "shims"
    argv = [sys.executable, "-m", "mcpshim", "wrap-config", str(path), "--all"]
    argv += ["--dir", str(shim_dir)]
    t0 = time.perf_counter()
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    if out.returncode != 0:
        raise SystemExit(f"wrap-config failed for n={n}: {out.stderr}")
    assert out.stdout.count("\nwrapped ") + out.stdout.startswith("wrapped ") == n
    return elapsed, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,4000,20000")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        _, startup = run_once(1, tmp)  # interpreter and imports, taken off every figure
        results = [(n, *run_once(n, tmp)) for n in sizes]
    base = max(results[0][2] - startup, 1e-6) / results[0][0]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; startup {startup:.2f} s CPU")
    print(f"{'servers':>8} {'wall s':>8} {'CPU s':>8} {'CPU us/server':>14} {'ratio':>6}")
    for n, wall, cpu in results:
        per = max(cpu - startup, 1e-6) / n
        print(f"{n:>8} {wall:>8.2f} {cpu:>8.2f} {per * 1e6:>14.1f} {per / base:>6.2f}")


if __name__ == "__main__":
    throwaway_home()
    main()
