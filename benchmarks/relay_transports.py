"""The relay's transports against each other: p95 of a small MCP tool call through each.

`mcpshim run --mcp` has three ways to stand between a client and its server: the pump
child and recorder child of relay.forked (Linux, the default), the threads of
relay.threaded (where the children cannot run, and the design before them), and the
gate of relay.gate (`--lock L --enforce`: it reads each request before passing it on).
This times one small `tools/call` (the official SDK's client calling the `echo` tool of
tests/fixtures/mcp_tools_server.py) through each, in the same run and against the
threaded relay: `direct` (no relay), `threads` (the anchor: `run --mcp` with the pumps
forced into the supervisor's threads), `forked` (`run --mcp` as it runs), `gate` (`run
--mcp --lock L --enforce`, L approving the server) and `floor` (a bare splice relay that
records nothing: what any process in the path costs). Sessions of every variant take turns
call by call in a new random order, --gap ms apart (relay_sdk.measure).

`--starts N` also times N starts of each variant (in turns, a new order each round): from
the spawn to the answer to `initialize` as the client reads it. The pump child relays the
server's first answer while `run` is still loading the rest of itself (supervise.launch);
threads start with the supervisor, once it has loaded.

`--busy N` gives every server a family that works while the calls run: a shell that
execs /bin/true N times a second (a test runner, a build), so the supervisor has a trace
to read and a family to sample, in the process where the threaded relay's pumps run.

Prints, per size, each variant's median and p95 (ms) and its p95 and median minus the
threaded relay's, with the 95 % interval from resampling sessions, then calls
(benchmarks/stats), and whether that is measurable ('-': the interval holds zero; '+':
slower; '<': faster).

    .venv/bin/python benchmarks/relay_transports.py [--rounds 200] [--sessions 3]
        [--gap 10] [--sizes 1,1024] [--busy 0] [--no-trace] [--starts 0]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import tempfile
import time
from typing import TextIO

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from relay_latency import FLOOR, THREADS, throwaway_env
from relay_sdk import SERVER, approve, measure
from stats import grouped_diff_ci, p95, verdict
from throwaway import throwaway_home

VARIANTS = ("direct", "threads", "forked", "gate", "floor")


def busy_server(server: list[str], per_second: int) -> list[str]:
    """The server with a sibling that execs /bin/true `per_second` times a second, in the
    same family (it goes when the server's shell is ended with the session)."""
    if not per_second:
        return server
    pause = f"{1 / per_second:.4f}"
    loop = f"while :; do /bin/true; sleep {pause}; done"
    quoted = " ".join(f"'{a}'" for a in server)
    return ["/bin/sh", "-c", f"({loop}) & trap 'kill $!' EXIT; {quoted}"]


async def starts(
    variants: dict[str, list[str]], count: int, env: dict[str, str], errlog: TextIO
) -> dict[str, list[float]]:
    """ms from the spawn to the answer to `initialize`, `count` starts per variant."""
    got: dict[str, list[float]] = {name: [] for name in variants}
    rng = random.Random(2)
    for _ in range(count):
        for name in rng.sample(list(variants), len(variants)):
            argv = variants[name]
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
            async with contextlib.AsyncExitStack() as stack:
                t0 = time.perf_counter()
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                got[name].append((time.perf_counter() - t0) * 1000)
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200, help="calls per size and session")
    ap.add_argument("--sessions", type=int, default=3, help="sessions (servers) per variant")
    ap.add_argument("--gap", type=float, default=10.0, help="ms between calls (0: none)")
    ap.add_argument("--sizes", default="1,1024", help="bytes of arguments, comma-separated")
    ap.add_argument("--busy", type=int, default=0, help="execs a second in each server's family")
    ap.add_argument("--no-trace", action="store_true", help="run every `run` with --no-trace")
    ap.add_argument("--starts", type=int, default=0, help="also time N starts of each variant")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    if args.rounds < 20 or args.sessions < 1 or args.gap < 0 or args.busy < 0 or not sizes:
        ap.error("--rounds at least 20, --sessions at least 1, --gap and --busy at least 0")
    server = busy_server([sys.executable, str(SERVER)], args.busy)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        env = throwaway_env(tmp)
        opts = ["--dir", f"{tmp}/shims", "--mcp", *(["--no-trace"] if args.no_trace else [])]
        run = [sys.executable, "-m", "mcpshim", "run", *opts]
        threads = [sys.executable, "-c", THREADS, "run", *opts]
        lock = approve(tmp, env, [*run, "--", *server])
        variants = {
            "direct": server,
            "threads": [*threads, "--", *server],
            "forked": [*run, "--", *server],
            "gate": [*run, "--lock", lock, "--enforce", "--", *server],
            "floor": [sys.executable, "-c", FLOOR, *server],
        }
        rounds = dict.fromkeys(sizes, args.rounds)
        with open(f"{tmp}/stderr", "w+") as errlog:
            times = anyio.run(measure, variants, args.sessions, env, rounds, args.gap, errlog)
            started = anyio.run(starts, variants, args.starts, env, errlog) if args.starts else {}
            errlog.seek(0)
            said = errlog.read()
    if "Traceback" in said:
        sys.exit(f"a variant failed:\n{said[-2000:]}")
    print(f"{args.sessions} sessions per variant, {args.rounds} calls per session and size, "
          f"{args.gap:g} ms between calls, busy {args.busy}/s, "
          f"{'untraced' if args.no_trace else 'traced'}")  # fmt: skip
    for size in sizes:
        got = times[size]
        print(f"\n{size} B{'':>10}{'median':>8}{'p95':>8}   {'p95 - threads':>30}"
              f"   {'median - threads':>30}")  # fmt: skip
        for name in VARIANTS:
            pooled = [x for s in got[name] for x in s]
            line = f"{name:>12}{statistics.median(pooled):>10.3f}{p95(pooled):>8.3f}"
            if name != "threads":
                for stat in (p95, statistics.median):
                    d, lo, hi = grouped_diff_ci(got["threads"], got[name], stat)
                    line += f"   {d:>+8.3f} [{lo:>+7.3f},{hi:>+7.3f}] {verdict(lo, hi)}"
            print(line, flush=True)
    if started:
        print(f"\nspawn to initialize's answer, {args.starts} starts each: median (min-max) ms")
        for name in VARIANTS:
            t = started[name]
            print(f"{name:>12}{statistics.median(t):>10.1f} ({min(t):.1f}-{max(t):.1f})")


if __name__ == "__main__":
    throwaway_home()
    main()
