"""What tracing by default costs on the demo's workload (`make demo`), against --no-trace.

The demo's server (examples/mcp_demo_server.py) and its three tool calls (git_log,
search_todos: a composed `sh -c` pipeline, run_test: npm -> sh -> node, leaving a helper
behind) are driven by the official SDK client through `mcpshim run --mcp --on-exit
terminate --grace 1`, once traced (the default) and once with --no-trace, in a new random
order each round, on one throwaway HOME (the demo's workspace). Prints per call the median
duration as the client sees it, and the session's wall time from the client's start to
`mcpshim run`'s exit (which includes parsing the trace and writing its records), with what
tracing adds.

    python benchmarks/trace_demo.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from throwaway import throwaway_home

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("demo", ROOT / "examples" / "demo.py")
assert _spec is not None and _spec.loader is not None
demo: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(demo)
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("git_log", {"count": 3}),
    ("search_todos", {"word": "TODO"}),
    ("run_test", {}),
]


async def session(params: StdioServerParameters) -> dict[str, float]:
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        for name, args in CALLS:
            c0 = time.perf_counter()
            result = await s.call_tool(name, args)
            out[name] = (time.perf_counter() - c0) * 1e3
            assert not result.is_error, result
    out["session"] = (time.perf_counter() - t0) * 1e3
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcpshim-trace-demo-") as tmp:
        home = Path(tmp)
        env = demo.throwaway_env(home)
        mcpshim = [sys.executable, "-m", "mcpshim"]
        subprocess.run([*mcpshim, "install", *demo.SHIMS], env=env, check=True, capture_output=True)
        ws = demo._workspace(home, env)
        server = [sys.executable, str(ROOT / "examples" / "mcp_demo_server.py")]
        modes = {"--no-trace": ["--no-trace"], "traced": []}
        got: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
        rnd = random.Random(1)
        for r in range(opts.rounds + 1):  # the first round warms caches
            order = list(modes)
            rnd.shuffle(order)
            for mode in order:
                run = ["run", "--mcp", "--on-exit", "terminate", "--grace", "1", *modes[mode]]
                params = StdioServerParameters(
                    command=mcpshim[0], args=[*mcpshim[1:], *run, "--", *server], env=env,
                    cwd=str(ws),
                )  # fmt: skip
                times = anyio.run(session, params)
                if r:
                    got[mode].append(times)
    print(f"the demo's session, {opts.rounds} rounds; medians in ms (client side)")
    print(f"{'':14} {'--no-trace':>11} {'traced':>9} {'added':>8}")
    for key in [*(n for n, _ in CALLS), "session"]:
        a = statistics.median(t[key] for t in got["--no-trace"])
        b = statistics.median(t[key] for t in got["traced"])
        print(f"{key:14} {a:11.1f} {b:9.1f} {b - a:+8.1f}")
    return 0


if __name__ == "__main__":
    throwaway_home()
    raise SystemExit(main())
