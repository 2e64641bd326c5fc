"""What `run --contain` costs: setting the ruleset up at session start, and each exec after.

Session start (issue 33's bound: at most 5 ms). A lock entry like a Node server's (node,
npm through `#!/usr/bin/env node`, sh, git, python3, the shims of git sh node npm, strace)
becomes a plan (each file's ELF loader and #! line read) and a ruleset (a rule per file);
then the server is started contained (a thread restricts itself and calls posix_spawn),
against posix_spawn as the supervisor starts an uncontained one, alternating: the time to
a child that has exec'd and exited (`/bin/true`, reaped).

Per exec (the bound: nothing measurable). One dash loop fork+execs `git --version` N
times, started uncontained (posix_spawn) or contained (the ruleset above, git approved),
interleaved over several rounds in a new random order; plus an A/A pair (a second
uncontained run alongside) that shows how large a difference noise makes here. A
difference is measurable when the 95 % bootstrap interval of the difference of medians
leaves out zero (benchmarks/stats).

    python benchmarks/contain_cost.py [-n 200] [--rounds 9] [--setups 200]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcpshim.contract.lockfile import Boundary, Executable, ServerApproval, ToolApproval
from mcpshim.paths import Locations
from mcpshim.sandbox import landlock
from mcpshim.sandbox.contained import Containment, build
from mcpshim.shim import install, targets
from stats import grouped_median_diff_ci, verdict
from throwaway import throwaway_home


def server(paths: list[str]) -> ServerApproval:
    tool = ToolApproval("run", "", boundary=Boundary(tuple(Executable(p) for p in paths[1:])))
    return ServerApproval("bench", program=Executable(paths[0]), tools={"run": tool})


Spawn = Callable[[str, list[str], dict[str, str], list[tuple[Any, ...]]], int]


def spawn_wait(spawn: Spawn, argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    pid = spawn(argv[0], argv, env, [])
    os.waitpid(pid, 0)
    return time.perf_counter() - t0


def posix(path: str, argv: list[str], env: dict[str, str], actions: list[tuple[Any, ...]]) -> int:
    return os.posix_spawn(path, argv, env, file_actions=actions, setpgroup=0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200, help="fork+execs per loop")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--setups", type=int, default=200, help="ruleset set-ups timed")
    opts = ap.parse_args()
    abi, why = landlock.unavailable()
    search = ":".join(targets.trusted_search_path())
    found = {n: shutil.which(n, path=search) for n in ("node", "npm", "sh", "git", "python3")}
    strace = shutil.which("strace")
    if abi < 1 or None in found.values():
        print(f"needs Landlock ({why or 'ok'}) and {', '.join(found)}", file=sys.stderr)
        return 2
    paths = [p for p in found.values() if p]
    with tempfile.TemporaryDirectory(prefix="mcpshim-contain-bench-") as tmp:
        root = Path(tmp)
        loc = Locations(root / "shims", root / "log")
        install.install(loc, ["git", "sh", "node", "npm"], {})
        child_path = f"{loc.shim_dir}:{search}"
        approval = server(paths)

        def setup() -> Containment:
            return build(approval, "bench.lock", abi, loc, strace, child_path, None, paths[0])

        first = setup()
        rules = len(first.plan.execute)
        first.ruleset.close()
        setups = []
        for _ in range(opts.setups):
            t0 = time.perf_counter()
            c = setup()
            setups.append(time.perf_counter() - t0)
            c.ruleset.close()
        env = {"PATH": search}
        true = ["/bin/true"]
        starts: dict[str, list[float]] = {"posix_spawn": [], "contained": []}
        for i in range(opts.setups):
            for key in list(starts) if i % 2 else list(reversed(starts)):
                if key == "contained":
                    c = build(server([*paths, os.path.realpath(true[0])]), "bench.lock", abi,
                              loc, None, child_path, None, true[0])  # fmt: skip
                    starts[key].append(spawn_wait(c.spawn, true, env))
                else:
                    starts[key].append(spawn_wait(posix, true, env))
        loop = f'i=0; while [ "$i" -lt {opts.n} ]; do git --version >/dev/null; i=$((i+1)); done'
        sh = ["/bin/sh", "-c", loop]
        per: dict[str, list[list[float]]] = {"uncontained": [], "again": [], "contained": []}
        rnd = random.Random(1)
        for _ in range(opts.rounds):
            order = list(per)
            rnd.shuffle(order)
            for key in order:
                if key == "contained":
                    c = build(approval, "bench.lock", abi, loc, None, child_path, None, paths[2])
                    per[key].append([spawn_wait(c.spawn, sh, env) / opts.n])
                else:
                    per[key].append([spawn_wait(posix, sh, env) / opts.n])
    load = os.getloadavg()[0]
    print(f"Landlock ABI {abi} ({os.uname().release}); load {load:.2f}")
    med = statistics.median(setups) * 1e3
    p95 = sorted(setups)[int(0.95 * len(setups)) - 1] * 1e3
    verdict_setup = "within" if med <= 5 else "ABOVE"
    print(f"ruleset set-up ({rules} files): median {med:.3f} ms, p95 {p95:.3f} ms "
          f"({verdict_setup} the 5 ms bound)")  # fmt: skip
    spawn = {k: statistics.median(v) * 1e3 for k, v in starts.items()}
    print(f"start /bin/true: posix_spawn {spawn['posix_spawn']:.3f} ms, contained (a thread "
          f"restricts itself, then posix_spawn) {spawn['contained']:.3f} ms: "
          f"{spawn['contained'] - spawn['posix_spawn']:+.3f} ms")  # fmt: skip
    total = med + spawn["contained"] - spawn["posix_spawn"]
    print(f"session start, all told: {total:.3f} ms ({'within' if total <= 5 else 'ABOVE'} 5 ms)")
    base = statistics.median(x for g in per["uncontained"] for x in g) * 1e3
    print(f"{opts.n} fork+execs of `git --version` from a dash loop, {opts.rounds} rounds: "
          f"uncontained {base:.3f} ms per exec")  # fmt: skip
    for key in ("again", "contained"):
        point, low, high = grouped_median_diff_ci(per["uncontained"], per[key])
        v = verdict(low, high)
        what = "measurable" if v != "-" else "not measurable"
        print(f"  {key:11} {point * 1e3:+.3f} ms per exec (95 % [{low * 1e3:+.3f}, "
              f"{high * 1e3:+.3f}]): {what}")  # fmt: skip
    return 0


if __name__ == "__main__":
    throwaway_home()
    raise SystemExit(main())
