"""What `mcpshim run --mcp` adds to a real MCP tool call, from 1 byte to 1 MiB of arguments.

The official SDK's client calls the `echo` tool of a server written with the official SDK
(tests/fixtures/mcp_tools_server.py): the same bytes go out as arguments and come back as
the result. Three sessions stay open side by side and take turns call by call, so load from
elsewhere falls on all alike: `direct` (the server as a client starts it), `direct-again`
(a second identical one, the A/A comparison: what noise alone makes) and `run` (the server
under `mcpshim run --mcp`, the relay recording every call); with --floor also `floor`, the
server behind a bare splice relay that records nothing (relay_latency.FLOOR): what any
process in the path costs.

For each size: the direct median and p95 (ms), what `run` and `direct-again` add to the
median, with the 95 % bootstrap interval, and whether that is measurable ('-': the
interval holds zero; '+': slower; '<': faster).

    .venv/bin/python benchmarks/relay_sdk.py [--rounds 200] [--floor]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from relay_latency import FLOOR, throwaway_env
from stats import median_diff_ci, verdict

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "fixtures" / "mcp_tools_server.py"
SIZES = [1, 1 << 10, 16 << 10, 256 << 10, 1 << 20]
WARMUP = 5


async def measure(
    commands: dict[str, list[str]], env: dict[str, str], rounds: dict[int, int], errlog: TextIO
) -> dict[int, dict[str, list[float]]]:
    """Call times in ms per size and session, warm-up calls left out, sessions taking turns."""
    times: dict[int, dict[str, list[float]]] = {s: {m: [] for m in commands} for s in SIZES}
    async with contextlib.AsyncExitStack() as stack:
        sessions: dict[str, ClientSession] = {}
        for name, argv in commands.items():
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions[name] = session
        names = list(sessions)
        for size in SIZES:
            text = "x" * size
            for i in range(rounds[size] + WARMUP):
                order = names[i % len(names) :] + names[: i % len(names)]  # no fixed first
                for name in order:
                    t0 = time.perf_counter()
                    result = await sessions[name].call_tool("echo", {"text": text})
                    took = (time.perf_counter() - t0) * 1000
                    if getattr(result, "is_error", getattr(result, "isError", False)):
                        sys.exit(f"{name}: the echo call failed: {result.content}")
                    if i >= WARMUP:
                        times[size][name].append(took)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200, help="calls per size and session")
    ap.add_argument("--floor", action="store_true", help="also time a bare splice relay")
    args = ap.parse_args()
    server = [sys.executable, str(SERVER)]
    with tempfile.TemporaryDirectory() as tmp:
        env = throwaway_env(tmp)
        run = [sys.executable, "-m", "mcpshim", "run", "--dir", f"{tmp}/shims", "--mcp", "--"]
        commands = {"direct": server, "direct-again": server, "run": [*run, *server]}
        if args.floor:
            commands["floor"] = [sys.executable, "-c", FLOOR, *server]
        rounds = {s: args.rounds if s <= 64 << 10 else max(20, args.rounds // 4) for s in SIZES}
        with open(f"{tmp}/stderr", "w+") as errlog:
            times = anyio.run(measure, commands, env, rounds, errlog)
    others = [name for name in commands if name != "direct"]
    head = f"{'size':>8} {'direct med':>10} {'p95':>7}"
    for name in others:
        head += f"  {'+' + name + ' med':>13} {'95% interval':>17}  "
    print(head + " (ms)")
    for size in SIZES:
        got = times[size]
        base = got["direct"]
        p95 = statistics.quantiles(base, n=20)[-1]
        line = f"{size:>8} {statistics.median(base):>10.3f} {p95:>7.3f}"
        for name in others:
            diff, low, high = median_diff_ci(base, got[name])
            line += f"  {diff:>+13.3f} [{low:>+7.3f},{high:>+7.3f}] {verdict(low, high)}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
