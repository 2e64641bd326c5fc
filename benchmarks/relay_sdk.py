"""What `mcpshim run --mcp` adds to a real MCP tool call, from 1 byte to 1 MiB of arguments.

The official SDK's client calls the `echo` tool of a server written with the official SDK
(tests/fixtures/mcp_tools_server.py): the same bytes go out as arguments and come back as
the result. Each variant runs in several sessions (server processes) at once, and all the
sessions take turns call by call, in a new random order each round, so load from elsewhere
falls on all alike: `direct` (the server as a client starts it), `direct-again`
(identical: the A/A comparison, what noise alone makes) and `run` (the server under
`mcpshim run --mcp`, the relay recording every call); with --floor also `floor`, the
server behind a bare splice relay that records nothing (relay_latency.FLOOR): what any
process in the path costs. With --strace also `floor+strace` (the bare relay, the server
under plain strace with `run`'s trace options, trace.strace.strace_argv: what strace alone
costs) and `no-trace` (`run --mcp --no-trace`).

Between two calls the client waits --gap ms, as an agent does between tool calls (a model
turn takes far longer): the recorder writes a call's records in that pause, as it would.
With --gap 0 the calls follow each other, and a call can share the cores with the records
of the one before (another session's, or its own).

For each size: the direct median and p95 (ms), what each other variant adds to the
median (with --floor, also what `run` adds to `floor`), with the 95 % interval from
resampling sessions and then calls (benchmarks/stats), and whether that is measurable
('-': the interval holds zero; '+': slower; '<': faster).

    .venv/bin/python benchmarks/relay_sdk.py [--rounds 100] [--sessions 3] [--gap 10] [--floor]
        [--strace] [--sizes 1,1024,...] [--tree NAME=DIR ...]

--tree NAME=DIR adds a variant: `run --mcp` from another checkout's src/ (a change measured
against this one, or this one against an older commit's worktree).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpshim.trace.strace import strace_argv
from relay_latency import FLOOR, throwaway_env
from stats import grouped_median_diff_ci, verdict
from throwaway import throwaway_home

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "fixtures" / "mcp_tools_server.py"
SIZES = [1, 1 << 10, 16 << 10, 256 << 10, 1 << 20]
WARMUP = 3

Times = dict[int, dict[str, list[list[float]]]]  # size -> variant -> per session, call ms


async def measure(
    variants: dict[str, list[str]],
    sessions: int,
    env: dict[str, str],
    rounds: dict[int, int],
    gap: float,
    errlog: TextIO,
) -> Times:
    """Call times in ms per size, variant and session, warm-up calls left out."""
    times: Times = {s: {v: [[] for _ in range(sessions)] for v in variants} for s in rounds}
    rng = random.Random(1)
    async with contextlib.AsyncExitStack() as stack:
        open_: list[tuple[str, int, ClientSession]] = []
        for k in range(sessions):
            for name, argv in variants.items():
                params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                await session.list_tools()  # as clients do (and --enforce requires)
                open_.append((name, k, session))
        for size, count in rounds.items():
            text = "x" * size
            for i in range(count + WARMUP):
                # A new order each round: no session always follows the same other (whose
                # recorder may still be at work when the next call starts).
                order = rng.sample(open_, len(open_))
                for name, k, session in order:
                    t0 = time.perf_counter()
                    result = await session.call_tool("echo", {"text": text})
                    took = (time.perf_counter() - t0) * 1000
                    if getattr(result, "is_error", getattr(result, "isError", False)):
                        sys.exit(f"{name}: the echo call failed: {result.content}")
                    if i >= WARMUP:
                        times[size][name][k].append(took)
                    if gap:
                        await anyio.sleep(gap / 1000)
    return times


def approve(tmp: str, env: dict[str, str], run: list[str]) -> str:
    """A lock approving the server: one recorded session that lists its tools, approved."""
    params = StdioServerParameters(command=run[0], args=run[1:], env=env)

    async def once() -> None:
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await s.list_tools()
            await s.call_tool("echo", {"text": "x"})

    anyio.run(once)
    lock = f"{tmp}/mcpshim.lock"
    cli = [sys.executable, "-m", "mcpshim", "approve", "--dir", f"{tmp}/shims", "--yes"]
    subprocess.run([*cli, "--lock", lock], env=env, check=True, capture_output=True)
    return lock


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100, help="calls per size and session")
    ap.add_argument("--sessions", type=int, default=3, help="sessions (servers) per variant")
    ap.add_argument("--gap", type=float, default=10.0, help="ms between calls (0: none)")
    ap.add_argument("--floor", action="store_true", help="also time a bare splice relay")
    ap.add_argument(
        "--strace",
        action="store_true",
        help="also time `floor+strace` (the bare relay, the server under plain strace with "
        "run --trace's options, its output into a file) and `run --no-trace`",
    )
    ap.add_argument(
        "--enforce",
        action="store_true",
        help="also time `run --mcp --lock L --enforce` (the relay that parses each request "
        "before passing it on), with L approving the server",
    )
    ap.add_argument(
        "--sizes",
        default=",".join(map(str, SIZES)),
        help="comma-separated message sizes in bytes (up to 1 MiB); default: %(default)s",
    )
    ap.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="also time `run --mcp` from another checkout's src/ (a change against this one)",
    )
    args = ap.parse_args()
    if args.rounds < 1 or args.sessions < 1 or args.gap < 0:
        ap.error("--rounds and --sessions must be at least 1, --gap at least 0")
    try:
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--sizes {args.sizes}: want whole numbers of bytes, comma-separated")
    if not sizes or not all(1 <= x <= 1 << 20 for x in sizes):
        ap.error("--sizes: each from 1 to 1048576 bytes")
    server = [sys.executable, str(SERVER)]
    with tempfile.TemporaryDirectory() as tmp:
        env = throwaway_env(tmp)
        run = [sys.executable, "-m", "mcpshim", "run", "--dir", f"{tmp}/shims", "--mcp", "--"]
        variants = {"direct": server, "direct-again": server, "run": [*run, *server]}
        if args.floor or args.strace:
            variants["floor"] = [sys.executable, "-c", FLOOR, *server]
        if args.strace:
            strace = shutil.which("strace")
            if strace is None:
                ap.error("--strace: no strace on PATH")
            traced = strace_argv(strace, f"{tmp}/strace.out", server)
            variants["floor+strace"] = [sys.executable, "-c", FLOOR, *traced]
            variants["no-trace"] = [*run[:-1], "--no-trace", "--", *server]
        if args.enforce:
            lock = approve(tmp, env, [*run, *server])
            enforce = [*run[:-1], "--lock", lock, "--enforce", "--"]
            variants["enforce"] = [*enforce, *server]
        for spec in args.tree:
            name, _, where = spec.partition("=")
            src = Path(where).resolve() / "src"
            if not name or name in variants or not (src / "mcpshim").is_dir():
                ap.error(f"--tree {spec}: want a new NAME=DIR, DIR holding src/mcpshim")
            variants[name] = ["env", f"PYTHONPATH={src}", *run, *server]
        # As many calls at 1 MiB as at 1 byte: with a quarter, a 3 % difference on 21 ms
        # calls went unseen.
        rounds = dict.fromkeys(sizes, args.rounds)
        with open(f"{tmp}/stderr", "w+") as errlog:
            times = anyio.run(measure, variants, args.sessions, env, rounds, args.gap, errlog)
    print(
        f"{args.sessions} sessions per variant, {args.rounds} calls per session and size, "
        f"{args.gap:g} ms between calls"
    )
    # (label, baseline, variant): each variant against direct; with --floor also what the
    # recording relay adds to the bare one (what mcpshim costs beyond having a process there).
    pairs = [(f"+{name} med", "direct", name) for name in variants if name != "direct"]
    if args.floor or args.strace:
        pairs.append(("run-floor med", "floor", "run"))
    if args.strace:
        # what strace alone adds to the bare relay, and what `run` adds beyond that anchor
        pairs.append(("strace-floor", "floor", "floor+strace"))
        pairs.append(("run-fl+strace", "floor+strace", "run"))
    if args.enforce:
        pairs.append(("enf-run med", "run", "enforce"))
    head = f"{'size':>8} {'direct med':>10} {'p95':>7}"
    for label, _, _ in pairs:
        head += f"  {label:>13} {'95% interval':>17}  "
    print(head + " (ms)")
    for size in sizes:
        got = times[size]
        base = [x for s in got["direct"] for x in s]
        p95 = statistics.quantiles(base, n=20)[-1]
        line = f"{size:>8} {statistics.median(base):>10.3f} {p95:>7.3f}"
        for _, baseline, name in pairs:
            diff, low, high = grouped_median_diff_ci(got[baseline], got[name])
            line += f"  {diff:>+13.3f} [{low:>+7.3f},{high:>+7.3f}] {verdict(low, high)}"
        print(line, flush=True)


if __name__ == "__main__":
    throwaway_home()
    main()
