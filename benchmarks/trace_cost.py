"""Added wall time per exec with `mcpshim run`'s tracing, against direct and shimmed runs.

One dash loop fork+execs `git --version` N times; the loop runs these ways, interleaved over
several rounds, in a new random order each round:
  direct            no tracer
  shimmed           through the git shim
  bare strace       `strace -f --seccomp-bpf -e trace=execve` into a file: what any
                    ptrace-based exec tracer pays here (the anchor of issue 20's item 5)
  traced (file)     the tracing before issue 21: strace without -v, writing to a file
  traced            the session's tracing now: strace -v into a FIFO that `TraceRun.pump`
                    drains here, cutting every exec's environment down to PATH before it
                    writes the lines to its file (what the supervisor's loop does)
  traced (no net)   the same without the socket calls on strace's list (and -y, not -yy):
                    the tracing before issue 29, whose per-exec cost the socket calls must
                    not raise by more than 0.05 ms
  traced + shimmed  both
  run --no-trace    the whole `mcpshim run` (in this process), untraced
  run               the whole `mcpshim run`, traced as by default (the trace parsed and
                    written to its log at the end)
The environment the loop runs with is padded to --env-bytes (real sessions carry a few KiB;
strace -v prints all of it, four output bytes per byte). Prints the median per exec of each,
wall time and CPU time (user + system of the loop, strace and, for `traced`, this process's
pump: wall time on a loaded machine moves by more than tracing costs), and what tracing adds
per exec over direct (issue 20's target: at most 0.3 ms). Then the parse cost: turning the
trace of one loop into log records, per exec.

    python benchmarks/trace_cost.py [-n 200] [--rounds 7] [--env-bytes 3000]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import resource
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import TypeVar

from mcpshim.log import execlog
from mcpshim.paths import Locations
from mcpshim.proc.procinfo import read_stat
from mcpshim.shim import install, targets
from mcpshim.supervise.supervisor import (
    TRACE_BATCH_S,
    RunOptions,
    Supervisor,
    set_child_subreaper,
)
from mcpshim.trace.parse import read_output
from mcpshim.trace.records import exec_payloads
from mcpshim.trace.run import TraceRun, is_gone, tracer_of
from mcpshim.trace.strace import build_trace, strace_argv
from throwaway import throwaway_home


def wait_tracer(pid: int) -> int:
    """The tracer's pid once it has attached. A command over before we looked (a zombie
    shows no TracerPid) left its tracer to us, the subreaper: our child named strace."""
    tracer = 0
    while not tracer and not is_gone(pid):
        tracer = tracer_of(pid) or 0
    if not tracer:
        for entry in os.listdir("/proc"):
            st = read_stat(int(entry)) if entry.isdigit() else None
            if st and st.pid != pid and st.ppid == os.getpid() and st.comm == b"strace":
                return st.pid
    return tracer


def cpu() -> float:
    """CPU seconds of this process and of every child reaped so far (strace too: this
    process is their subreaper)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def reap_all() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def run_plain(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    tracer = wait_tracer(proc.pid) if argv[0].endswith("strace") else 0
    proc.wait()
    while tracer and not is_gone(tracer):  # the trace is complete only when strace is done
        time.sleep(0.0005)
    return time.perf_counter() - t0


def run_session(
    loc: Locations, strace: str, cmd: list[str], env: dict[str, str], net: bool = True
) -> float:
    """As `mcpshim run` traces: the FIFO drained by TraceRun.pump while the command runs
    (`net`: the socket calls on strace's list, as run has them since issue 29)."""
    tr = TraceRun(loc, strace)
    t0 = time.perf_counter()
    argv = tr.wrap(cmd) if net else strace_argv(strace, str(tr.fifo), cmd, net=False)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    tr.tracer_pid = wait_tracer(proc.pid)
    tr.started()
    sel = selectors.DefaultSelector()  # as the supervisor's loop: woken by the FIFO, then
    sel.register(tr.fd, selectors.EVENT_READ)  # deaf to it for TRACE_BATCH_S
    while proc.poll() is None:
        if sel.select(0.1):
            tr.pump()
            time.sleep(TRACE_BATCH_S)
    sel.close()
    while tr.tracer_pid and not is_gone(tr.tracer_pid):
        tr.pump()
        time.sleep(0.0005)
    tr._close(True)
    elapsed = time.perf_counter() - t0
    shutil.rmtree(tr.dir)
    return elapsed


def run_supervised(
    loc: Locations, strace: str | None, cmd: list[str], env: dict[str, str]
) -> float:
    """The whole `mcpshim run` (here, in this process): supervisor, sampling every 100 ms,
    and with strace the trace pumped, parsed and written to the log at the end."""
    t0 = time.perf_counter()
    tracer = TraceRun(loc, strace) if strace else None
    run_quietly(Supervisor(loc, cmd, RunOptions(), environ=env, tracer=tracer))
    return time.perf_counter() - t0


def run_quietly(sup: Supervisor) -> None:
    """The session, its command's stdout into /dev/null (this process's own is the table)."""
    with open(os.devnull, "wb") as null:
        saved = os.dup(1)
        os.dup2(null.fileno(), 1)
        try:
            sup.run()
        finally:
            os.dup2(saved, 1)
            os.close(saved)


K = TypeVar("K", bound=Hashable)


def measure(
    variants: Mapping[K, Callable[[], float]],
    rounds: int,
    output: Path,
    rnd: random.Random,
    per: int = 1,
) -> tuple[dict[K, list[float]], dict[K, list[float]]]:
    """Each variant once (warm caches), then `rounds` rounds in a new random order each:
    the wall and CPU seconds of every run, divided by `per`. `output` (a bare strace's
    file) is removed before each run."""
    times: dict[K, list[float]] = {k: [] for k in variants}
    cpus: dict[K, list[float]] = {k: [] for k in variants}
    for fn in variants.values():
        fn()
        reap_all()
    for _ in range(rounds):
        order = list(variants)
        rnd.shuffle(order)
        for key in order:
            output.unlink(missing_ok=True)
            c0 = cpu()
            times[key].append(variants[key]() / per)
            reap_all()
            cpus[key].append((cpu() - c0) / per)
    return times, cpus


def padded(env: dict[str, str], size: int) -> dict[str, str]:
    out = dict(env)
    i = 0
    while sum(len(k) + len(v) + 2 for k, v in out.items()) < size:
        out[f"BENCH_PAD_{i}"] = "x" * 60
        i += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200, help="fork+execs per loop")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--env-bytes", type=int, default=3000, help="environment size of the loop")
    opts = ap.parse_args()
    strace = shutil.which("strace")
    git = shutil.which("git", path=":".join(targets.trusted_search_path()))
    if strace is None or git is None:
        print("needs strace and git", file=sys.stderr)
        return 2
    loop = f'i=0; while [ "$i" -lt {opts.n} ]; do git --version; i=$((i+1)); done'
    cmd = ["/bin/sh", "-c", loop]
    with tempfile.TemporaryDirectory(prefix="mcpshim-trace-bench-") as tmp:
        root = Path(tmp)
        loc = Locations(root / "shims", root / "log")
        install.install(loc, ["git"], {})
        plain = padded({"PATH": os.path.dirname(git) + ":/usr/bin:/bin"}, opts.env_bytes)
        shimmed = {**plain, "PATH": f"{loc.shim_dir}:{plain['PATH']}"}
        output = root / "strace.out"
        old = strace_argv(strace, str(output), cmd, env=False)
        bare = [strace, "-DD", "-q", "-f", "--seccomp-bpf", "-o", str(output), "-e", "trace=execve"]
        variants: dict[str, Callable[[], float]] = {
            "direct": lambda: run_plain(cmd, plain),
            "shimmed": lambda: run_plain(cmd, shimmed),
            "bare strace": lambda: run_plain([*bare, "--", *cmd], plain),
            "traced (file)": lambda: run_plain(old, plain),
            "traced": lambda: run_session(loc, strace, cmd, plain),
            "traced (no net)": lambda: run_session(loc, strace, cmd, plain, net=False),
            "traced + shimmed": lambda: run_session(loc, strace, cmd, shimmed),
            "run --no-trace": lambda: run_supervised(loc, None, cmd, plain),
            "run": lambda: run_supervised(loc, strace, cmd, plain),
        }
        set_child_subreaper()
        times, cpus = measure(variants, opts.rounds, output, random.Random(1), opts.n)
        # Parse cost, on the trace of one traced loop (without -v: parsing reads argv).
        run_plain(old, plain)
        t0 = time.perf_counter()
        trace = build_trace(
            read_output(output), 0, b"/", None, None, execlog.now_anchor(), execlog.CLK_TCK
        )
        n_records = sum(1 for _ in exec_payloads(trace, "bench", "", {}))
        parse = (time.perf_counter() - t0) / opts.n
    med = {k: statistics.median(v) for k, v in times.items()}
    mcpu = {k: statistics.median(v) for k, v in cpus.items()}
    env_size = sum(len(k) + len(v) + 2 for k, v in plain.items())
    print(
        f"{opts.n} fork+execs of `git --version` from a dash loop, environment {env_size} bytes;"
        f" median of {opts.rounds}"
    )
    print(f"{'variant':18} {'wall ms':>8} {'added':>8} {'cpu ms':>8} {'added':>8}")
    refs = {"traced + shimmed": "shimmed", "run": "run --no-trace"}
    for key, m in med.items():
        ref = refs.get(key, "direct")
        add = "" if key == "direct" else f"{(m - med[ref]) * 1e3:8.3f}"
        cadd = "" if key == "direct" else f"{(mcpu[key] - mcpu[ref]) * 1e3:8.3f}"
        print(f"{key:18} {m * 1e3:8.3f} {add:>8} {mcpu[key] * 1e3:8.3f} {cadd:>8}")
    print(
        "(per exec; against direct, but traced + shimmed against shimmed and run against "
        "run --no-trace)"
    )
    added = (med["traced"] - med["direct"]) * 1e3
    before = (med["traced (file)"] - med["direct"]) * 1e3
    cpu_added = (mcpu["traced"] - mcpu["direct"]) * 1e3
    cpu_before = (mcpu["traced (file)"] - mcpu["direct"]) * 1e3
    print(f"CPU: tracing adds {cpu_added:.3f} ms per exec; before: {cpu_before:.3f}")
    run_cpu = (mcpu["run"] - mcpu["run --no-trace"]) * 1e3
    run_wall = (med["run"] - med["run --no-trace"]) * 1e3
    print(f"run over run --no-trace: {run_wall:.3f} ms wall, {run_cpu:.3f} ms CPU per exec")
    verdict = "within" if added <= 0.3 else "ABOVE"
    print(
        f"tracing adds {added:.3f} ms per exec ({verdict} the 0.3 ms target); before: {before:.3f}"
    )
    over_bare = (med["traced"] - med["bare strace"]) * 1e3
    cpu_over_bare = (mcpu["traced"] - mcpu["bare strace"]) * 1e3
    print(f"tracing over bare strace: {over_bare:.3f} ms wall, {cpu_over_bare:.3f} ms CPU per exec")
    net_wall = (med["traced"] - med["traced (no net)"]) * 1e3
    net_cpu = (mcpu["traced"] - mcpu["traced (no net)"]) * 1e3
    net_verdict = "within" if net_wall <= 0.05 else "ABOVE"
    print(
        f"the socket calls on strace's list: {net_wall:+.3f} ms wall ({net_verdict} the 0.05 ms "
        f"bound), {net_cpu:+.3f} ms CPU per exec"
    )
    print(f"parsing the trace into {n_records} records: {parse * 1e3:.3f} ms per exec")
    return 0


if __name__ == "__main__":
    throwaway_home()
    raise SystemExit(main())
