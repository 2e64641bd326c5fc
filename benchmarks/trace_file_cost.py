"""What tracing file calls (issue 40) costs `mcpshim run`: is it cheap enough to be on by
default?

Four commands, the issue's: `python3 -c "import json, email, http.client"` (python3 as the
caller's PATH finds it: an import-heavy start, mostly failed path probes), `npm --version`,
`git status` in a repository of 500 files, and a program that writes 1,000 files (what a
tool call that writes a tree does). Each runs these ways, in a new random order each round:
  direct            no tracer
  bare strace       `strace -f --seccomp-bpf` with run's whole syscall set and the file
                    calls (exec, fork, socket, metadata and file calls) into a file, detached
                    as run's (-DD -q): the anchor
  bare, no files    the same without the file calls: what the kernel's stops at the file
                    calls cost, whatever mcpshim does with their lines
  run               the whole `mcpshim run` in this process, traced, without the file calls
                    (the default)
  run + files       the same with them (`--trace-files`: the table of locations matched,
                    inodes read by the pump, trace-file records written)
Prints the median wall and CPU time (user + system of the command, strace and this
process's supervisor) of each, how many opens the command makes, and `run + files` over
`run` per command: the default is on only if that is at most 1.3 everywhere, wall and CPU
(on a shared machine the wall time moves with the others' load, the CPU time less); and
`bare strace` over `bare, no files`, the part of it no parser can cut.

    python benchmarks/trace_file_cost.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

from mcpshim.log.filetable import FileTable, Roots
from mcpshim.paths import Locations
from mcpshim.supervise.supervisor import RunOptions, Supervisor, set_child_subreaper
from mcpshim.trace.filefacts import FileTracing
from mcpshim.trace.fileparse import FILE_SYSCALLS
from mcpshim.trace.metaparse import META_SYSCALLS
from mcpshim.trace.run import TraceRun
from mcpshim.trace.strace import NET_SYSCALLS, SYSCALLS
from throwaway import throwaway_home
from trace_cost import measure, run_plain, run_quietly

LIMIT = 1.3  # the issue's: file tracing is the default when run + files <= 1.3 x run
WRITER = "import os\nos.makedirs('out', exist_ok=True)\nfor i in range(1000):\n" \
    "    with open(f'out/f{i}', 'w') as fh:\n        fh.write('x')\n"  # fmt: skip


def run_session(
    loc: Locations, strace: str, cmd: list[str], env: dict[str, str], cwd: Path, files: bool
) -> float:
    """The whole `mcpshim run` here (supervisor, sampler, the trace parsed and written at
    the end), in `cwd`, with or without the file calls."""
    import time

    tracer = TraceRun(loc, strace)
    if files:
        dirs = [d for d in env.get("PATH", "").split(os.pathsep) if d]
        tracer.files = FileTracing(FileTable(Roots.of(env, str(cwd), dirs)))
    here = os.getcwd()
    os.chdir(cwd)
    t0 = time.perf_counter()
    try:
        run_quietly(Supervisor(loc, cmd, RunOptions(), environ=env, tracer=tracer))
    finally:
        os.chdir(here)
    return time.perf_counter() - t0


def plain_in(cwd: Path, argv: list[str], env: dict[str, str]) -> float:
    here = os.getcwd()
    os.chdir(cwd)
    try:
        return run_plain(argv, env)
    finally:
        os.chdir(here)


def git_repo(root: Path, files: int = 500) -> Path:
    repo = root / "repo"
    repo.mkdir()
    for i in range(files):
        d = repo / f"d{i % 20}"
        d.mkdir(exist_ok=True)
        (d / f"f{i}.txt").write_text(f"file {i}\n")
    git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "files"], check=True)
    return repo


def opens(strace: str, argv: list[str], env: dict[str, str], cwd: Path, out: Path) -> int:
    """How many open calls the command makes (strace's own count)."""
    subprocess.run([strace, "-f", "-qq", "-o", str(out), "-e", "trace=open,openat,creat",
                    *argv], env=env, cwd=cwd, stdout=subprocess.DEVNULL, check=False)  # fmt: skip
    return sum(1 for line in out.read_text(errors="replace").splitlines() if "open" in line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    opts = ap.parse_args()
    strace = shutil.which("strace")
    path = os.environ.get("PATH", "/usr/bin:/bin")
    needed = {n: shutil.which(n, path=path) for n in ("python3", "npm", "git")}
    if strace is None or None in needed.values():
        print(f"needs strace, python3, npm and git: {needed}", file=sys.stderr)
        return 2
    env = {"PATH": path, "HOME": os.environ["HOME"], "LANG": "C.UTF-8"}
    set_child_subreaper()
    with tempfile.TemporaryDirectory(prefix="mcpshim-file-bench-") as tmp:
        root = Path(tmp)
        loc = Locations(root / "shims", root / "log")
        repo, work = git_repo(root), root / "work"
        work.mkdir()
        commands: dict[str, tuple[list[str], Path]] = {
            "python3 import": (["python3", "-c", "import json, email, http.client"], work),
            "npm --version": (["npm", "--version"], work),
            "git status (500 files)": (["git", "status", "--short"], repo),
            "write 1,000 files": ([sys.executable, "-S", "-c", WRITER], work),
        }
        output = root / "strace.out"
        calls = ",".join(dict.fromkeys((*SYSCALLS, *NET_SYSCALLS, *META_SYSCALLS,
                                        *FILE_SYSCALLS)))  # fmt: skip
        bare = [strace, "-DD", "-q", "-f", "--seccomp-bpf", "-o", str(output),
                "-e", f"trace={calls}", "--"]  # fmt: skip
        less = ",".join(dict.fromkeys((*SYSCALLS, *NET_SYSCALLS, *META_SYSCALLS)))
        nofiles = [*bare[:-2], f"trace={less}", "--"]
        variants: dict[tuple[str, str], Callable[[], float]] = {}
        for name, (argv, cwd) in commands.items():
            variants[(name, "direct")] = partial(plain_in, cwd, argv, env)
            variants[(name, "bare strace")] = partial(plain_in, cwd, [*bare, *argv], env)
            variants[(name, "bare, no files")] = partial(plain_in, cwd, [*nofiles, *argv], env)
            variants[(name, "run")] = partial(run_session, loc, strace, argv, env, cwd, False)
            variants[(name, "run + files")] = partial(run_session, loc, strace, argv, env, cwd,
                                                      True)  # fmt: skip
        counts = {n: opens(strace, a, env, c, root / "count.out") for n, (a, c) in commands.items()}
        times, cpus = measure(variants, opts.rounds, output, random.Random(40))
    print(f"median of {opts.rounds} rounds; python3 is {needed['python3']}")
    print(f"{'command':24} {'opens':>6} {'variant':14} {'wall ms':>9} {'cpu ms':>9}")
    worst = 0.0
    for name in commands:
        for variant in ("direct", "bare, no files", "bare strace", "run", "run + files"):
            wall = statistics.median(times[(name, variant)]) * 1e3
            c = statistics.median(cpus[(name, variant)]) * 1e3
            print(f"{name:24} {counts[name]:6} {variant:14} {wall:9.1f} {c:9.1f}")
        ratio = statistics.median(times[(name, "run + files")]) / statistics.median(
            times[(name, "run")]
        )
        cratio = statistics.median(cpus[(name, "run + files")]) / statistics.median(
            cpus[(name, "run")]
        )
        bare_ratio = statistics.median(times[(name, "bare strace")]) / statistics.median(
            times[(name, "direct")]
        )
        stops = statistics.median(times[(name, "bare strace")]) / statistics.median(
            times[(name, "bare, no files")]
        )
        worst = max(worst, ratio, cratio)
        print(f"{name:24} run + files / run: wall {ratio:.2f}x, cpu {cratio:.2f}x; "
              f"bare strace / direct: wall {bare_ratio:.2f}x; the file calls' stops alone "
              f"(bare / bare, no files): wall {stops:.2f}x")  # fmt: skip
    verdict = "on by default" if worst <= LIMIT else "an option (--trace-files)"
    print(f"worst run + files / run, wall or CPU: {worst:.2f}x (limit {LIMIT}x): file tracing "
          f"{verdict}")  # fmt: skip
    print(f"(load average {' '.join(f'{x:.1f}' for x in os.getloadavg())})")
    return 0


if __name__ == "__main__":
    throwaway_home()
    raise SystemExit(main())
