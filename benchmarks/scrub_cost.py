"""Cost of the shim's scrubber on hostile argument lists, against direct exec in the same run.

Shapes that once took a shim about a minute each (issue 14, item 3): many arguments with
one token among them (the scrubber rebuilt the argument list one argument at a time), a few
huge arguments full of a token prefix (each occurrence re-copied the rest of the string),
one token after a long text (the text before it was stripped with a quadratic pattern),
and `://` many times over (a trigger pattern backtracked on every exec). Each runs `true`
directly and through a shim under dash and bash-as-sh, a few times each, and prints the
median wall time and CPU time in seconds and the wall ratio to direct (inf: killed after
--limit seconds).

    python benchmarks/scrub_cost.py [-n 3] [--args 10000] [--huge 131072] [--limit 300]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from mcpshim.paths import Locations
from mcpshim.shim import install
from throwaway import throwaway_home

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def shapes(n_args: int, huge: int) -> dict[str, list[str]]:
    fill = (huge - 4) // 4  # an argument is at most 128 KiB, its NUL included
    return {
        f"{n_args} args + 1 token": [f"arg{i}" for i in range(n_args)] + [TOKEN],
        f"4 x {huge // 1024} KiB of ' sk-'": [" sk-" * fill] * 4,
        f"token after {huge // 1024} KiB": ["x" * (huge - 64) + " " + TOKEN],
        f"'://' x {fill}": ["://" * fill],
        f"{n_args} args, none secret": [f"arg{i}" for i in range(n_args)],
    }


def timed(argv: list[str], limit: float) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run; inf when it outlasts `limit`."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ)
    timer = threading.Timer(limit, os.kill, (pid, signal.SIGKILL))
    timer.start()
    _, status, usage = os.wait4(pid, 0)
    timer.cancel()
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return float("inf"), float("inf")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[0]} failed")
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=3, help="runs per variant")
    ap.add_argument("--args", type=int, default=10000, help="argument count of the long list")
    ap.add_argument("--huge", type=int, default=128 * 1024, help="bytes per huge argument")
    ap.add_argument("--limit", type=float, default=300, help="seconds before a run is killed")
    opts = ap.parse_args()
    target = shutil.which("true")
    dash, bash = shutil.which("dash"), shutil.which("bash")
    if target is None or dash is None or bash is None:
        print("needs true, dash and bash", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="mcpshim-scrub-") as tmp:
        root = Path(tmp)
        (root / "bin").mkdir()
        (root / "bin" / "sh").symlink_to(bash)  # bash in POSIX mode, as the tests run it
        shims = {}
        for label, interp in (("dash", dash), ("bash-as-sh", str(root / "bin" / "sh"))):
            loc = Locations(root / label / "shims", root / label / "log")
            install.install(loc, ["true"], {"true": target}, interpreter=interp)
            shims[label] = str(loc.shim_dir / "true")
        print(f"median of {opts.n} runs: wall s / CPU s (wall ratio to direct)")
        for name, args in shapes(opts.args, opts.huge).items():
            row = {"direct": [target, *args], **{k: [v, *args] for k, v in shims.items()}}
            cells = []
            base = 0.0
            for k, argv in row.items():
                runs = [timed(argv, opts.limit) for _ in range(opts.n)]
                wall = statistics.median(r[0] for r in runs)
                cpu = statistics.median(r[1] for r in runs)
                base = base or wall
                cells.append(f"{k} {wall:7.3f} / {cpu:6.3f} ({wall / base:6.1f}x)")
            print(f"{name:28} " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    throwaway_home()
    raise SystemExit(main())
