"""Review of a session whose tool calls ran in parallel, against the same session run
sequentially (issue 34, item 4).

Writes two logs of one relayed session each, framed exactly as the shims and the relay frame
them: N tool calls (default 10,000), each running git through its shim, a third each of
`git -C D/d<i> rev-parse` (its argument names the repository: evidence files it), of
`git --version` (identical calls: nothing tells them apart, they stay ambiguous) and of
`sh -c 'git status'` in the call's own package directory (its working directory is the
evidence, and the git it starts goes with it). In the sequential log each call's answer
comes before the next request; in the parallel one a call starts every tick (10 ms) and
answers 16 ticks later, so 16 are in flight, and the relay's pid marks (the kernel's pid
counter at each request and answer) bracket every fork with the 16 calls open then, as the
relay records them on Linux. Then runs `mcpshim review --session` (text and JSON) on each,
interleaved for `--rounds` rounds, each in a child process, and prints the medians, the
CPU time and the ratio parallel / sequential. Issue 34's bound: within 3 x.

It also prints what review said of the parallel session (ambiguity findings, calls filed
by evidence, calls that may have run something) and the exec counts of `sessions` and of
review's coverage for both, which must agree.

    python benchmarks/parallel_calls.py [--calls N] [--in-flight K] [--rounds R] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from approve_scale import _exec, _iso, session_head, write_boot
from mcpshim.log.eventlog import encode_event
from throwaway import throwaway_home

SESSION = "20260101T000000Z-parallel"
SERVER = 4000
CWD = b"/home/dev/src/proj"
TOOLS = ("git_rev_parse", "git_version", "run_in")


def _call(i: int) -> tuple[str, dict[str, Any]]:
    kind = TOOLS[i % 3]
    if kind == "git_rev_parse":
        return kind, {"repo_path": f"D/d{i}"}
    if kind == "run_in":
        return kind, {"package_dir": f"{CWD.decode()}/pkg{i}"}
    return kind, {}


def _execs(i: int, pid: int, ticks: int) -> tuple[list[bytes], int]:
    """The exec records of call i, its first fork `pid`; and how many pids it used."""
    kind = TOOLS[i % 3]
    if kind == "git_rev_parse":
        argv = [b"-C", f"D/d{i}".encode(), b"rev-parse", b"--git-dir"]
        return [_exec(pid, SERVER, ticks, "git", argv, CWD, SESSION)], 1
    if kind == "git_version":
        return [_exec(pid, SERVER, ticks, "git", [b"--version"], CWD, SESSION)], 1
    pkg = CWD + f"/pkg{i}".encode()
    sh = _exec(pid, SERVER, ticks, "sh", [b"-c", b"git status"], pkg, SESSION)
    return [sh, _exec(pid + 1, pid, ticks, "git", [b"status"], pkg, SESSION)], 2


def generate(log_dir: Path, calls: int, in_flight: int) -> None:
    """One session of `calls` calls, `in_flight` open at a time (1: sequential), in the
    order the log would hold them: at each tick the answers due, then the new request,
    then the forks it caused (each after the pid marks the relay read before it)."""
    write_boot(log_dir)
    out = session_head(SESSION, CWD, list(TOOLS), SERVER)
    pid = 5000  # the kernel's last pid: what the relay's marks read
    step, length = (1, in_flight) if in_flight > 1 else (3, 2)
    due: list[tuple[int, int]] = []  # (tick, call) of the answers still to come
    t0 = 1200
    for i in range(calls + 1):
        now = t0 + i * step
        while due and (i == calls or due[0][0] <= now):
            tick, c = due.pop(0)
            out.append(encode_event("mcp-response", {
                "session": SESSION, "time": _iso(tick), "direction": "server->client",
                "id": c, "method": "tools/call", "is_error": False, "error_code": None,
                "size": 100, "last_pid": pid,
            }))  # fmt: skip
        if i == calls:
            break
        name, arguments = _call(i)
        out.append(encode_event("mcp-request", {
            "session": SESSION, "time": _iso(now), "direction": "client->server", "id": i,
            "method": "tools/call", "tool": name, "arguments": arguments, "last_pid": pid,
        }))  # fmt: skip
        execs, used = _execs(i, pid + 1, now + (0 if step == 1 else 1))
        out += execs
        pid += used
        due.append((now + length, i))
    end = t0 + calls * step + length + 5
    out.append(encode_event("session-end", {"session": SESSION, "time": _iso(end),
                                            "exit_status": 0}))  # fmt: skip
    (log_dir / "exec.log").write_bytes(b"".join(out))


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall, CPU of the child, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        sys.stderr.write(done.stderr)
        raise SystemExit(f"{' '.join(argv[3:5])} failed: exit {done.returncode}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def _said(doc: dict[str, Any]) -> dict[str, int]:
    calls = doc["calls"]
    return {
        "MCS503": sum(f["rule"] == "MCS503" for f in doc["findings"]),
        "ambiguous_execs": sum(f["count"] for f in doc["findings"] if f["rule"] == "MCS503"),
        "calls_filed_by_evidence": sum(bool(c["filed_by_evidence"]) for c in calls),
        "calls_that_may_have_run": sum(bool(c["may_have_run"]) for c in calls),
        "calls_ran_nothing": sum(not c["ran"] and not c["may_have_run"] for c in calls),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--in-flight", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="mcpshim-parallel-"))
    env = {**os.environ, "XDG_CONFIG_HOME": str(base / "cfg")}
    cli = [sys.executable, "-m", "mcpshim"]
    modes = {"sequential": 1, "parallel": args.in_flight}
    loc = {}
    for mode, k in modes.items():
        generate(base / mode / "log", args.calls, k)
        loc[mode] = ["--dir", str(base / mode / "shims"), "--log-dir", str(base / mode / "log")]
    times: dict[str, list[tuple[float, float]]] = {}
    docs: dict[str, dict[str, Any]] = {}
    for _ in range(args.rounds):
        for mode in modes:
            for fmt in ("text", "json"):
                review = [*cli, "review", *loc[mode], "--session", SESSION, "--format", fmt]
                wall, cpu, out = _run(review, env)
                times.setdefault(f"{mode} {fmt}", []).append((wall, cpu))
                if fmt == "json":
                    docs[mode] = json.loads(out)
    counts = {}
    for mode in modes:
        _w, _c, out = _run([*cli, "sessions", *loc[mode], "--format", "json"], env)
        [listed] = json.loads(out)["sessions"]
        counts[mode] = {"sessions_execs": listed["execs"],
                        "review_execs": docs[mode]["coverage"][0]["execs"]}  # fmt: skip
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in times.items()}  # fmt: skip
    result: dict[str, Any] = {
        "calls": args.calls, "in_flight": args.in_flight, "rounds": args.rounds,
        "load": os.getloadavg()[0],
        "wall_s": {k: round(w, 2) for k, (w, _c) in med.items()},
        "cpu_s": {k: round(c, 2) for k, (_w, c) in med.items()},
        "ratio_wall": {f: round(med[f"parallel {f}"][0] / med[f"sequential {f}"][0], 2)
                       for f in ("text", "json")},
        "ratio_cpu": {f: round(med[f"parallel {f}"][1] / med[f"sequential {f}"][1], 2)
                      for f in ("text", "json")},
        "counts": counts,
        "parallel_said": _said(docs["parallel"]),
        "sequential_said": _said(docs["sequential"]),
    }  # fmt: skip
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    throwaway_home()
    main()
