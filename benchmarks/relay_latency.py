"""Added latency of the MCP relay per message size (1 B to 1 MiB): medians and p95.

A line-echo peer answers each `tools/call` message with the same bytes. For each size the
round trip is timed directly, through the relay alone (tests/fixtures/relayhost.py, no
recording), through the relay while it records (parse, redact, log write), and through
the real path: `mcpshim run --mcp -- python <line-echo>` (supervisor, sampler and relay).
Prints, per size, the direct median and p95 and the time each path adds to them.

    .venv/bin/python benchmarks/relay_latency.py [--rounds 300] [--modes run]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RELAYHOST = ROOT / "tests" / "fixtures" / "relayhost.py"
ECHO = (
    "import sys\n"
    "r, w = sys.stdin.buffer, sys.stdout.buffer\n"
    "for line in r:\n"
    "    w.write(line.replace(b'\"method\":\"tools/call\",', b'', 1)"
    ".replace(b'\"params\"', b'\"result\"', 1))\n"
    "    w.flush()\n"
)
SIZES = [1, 1 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20]
WARMUP = 5


def message(i: int, size: int) -> bytes:
    body = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x" * size}},
    }
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def read_line(fd: int, buf: bytearray) -> None:
    while b"\n" not in buf:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            raise EOFError
        buf += chunk
    del buf[: buf.index(b"\n") + 1]


def measure(argv: list[str], size: int, rounds: int, env: dict[str, str]) -> list[float]:
    """Round-trip times in ms, warm-up rounds left out."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env
        )
        assert proc.stdin and proc.stdout
        out, buf, times = proc.stdout.fileno(), bytearray(), []
        msgs = [message(i, size) for i in range(rounds + WARMUP)]
        try:
            for i, msg in enumerate(msgs):
                t0 = time.perf_counter()
                proc.stdin.write(msg)
                proc.stdin.flush()
                read_line(out, buf)
                if i >= WARMUP:
                    times.append((time.perf_counter() - t0) * 1000)
        except (EOFError, BrokenPipeError):
            err.seek(0)
            sys.exit(f"{argv[:4]} failed:\n{err.read().decode(errors='replace')}")
        proc.stdin.close()
        proc.wait()
    return times


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20)[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=300, help="round trips per size and mode")
    ap.add_argument(
        "--modes",
        default="relay,record,run",
        help="comma-separated paths to time besides direct: relay, record, run",
    )
    args = ap.parse_args()
    echo = [sys.executable, "-c", ECHO]
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "HOME": tmp,
            "XDG_DATA_HOME": f"{tmp}/data",
            "XDG_STATE_HOME": f"{tmp}/state",
            "XDG_CONFIG_HOME": f"{tmp}/config",
            "XDG_CACHE_HOME": f"{tmp}/cache",
        }
        log = str(Path(tmp) / "log")
        shims = str(Path(tmp) / "shims")
        mcpshim = [sys.executable, "-m", "mcpshim", "run", "--dir", shims, "--mcp", "--"]
        every = {
            "direct": echo,
            "relay": [sys.executable, str(RELAYHOST), tmp, "-", "bench", "--", *echo],
            "record": [sys.executable, str(RELAYHOST), tmp, log, "bench", "--", *echo],
            "run": [*mcpshim, *echo],
        }
        chosen = [m.strip() for m in args.modes.split(",") if m.strip()]
        unknown = [m for m in chosen if m not in every or m == "direct"]
        if unknown:
            ap.error(f"unknown mode(s): {', '.join(unknown)}")
        modes = {"direct": every["direct"], **{m: every[m] for m in chosen}}
        head = f"{'size':>8} {'direct med':>10} {'p95':>7}"
        for m in chosen:
            head += f" {'+' + m + ' med':>12} {'p95':>7}"
        print(head + "   (ms; + = added to direct)")
        for size in SIZES:
            rounds = args.rounds if size <= 64 << 10 else max(20, args.rounds // 3)
            got = {m: measure(a, size, rounds, env) for m, a in modes.items()}
            med = {m: statistics.median(t) for m, t in got.items()}
            top = {m: p95(t) for m, t in got.items()}
            line = f"{size:>8} {med['direct']:>10.3f} {top['direct']:>7.3f}"
            for m in chosen:
                line += f" {med[m] - med['direct']:>12.3f} {top[m] - top['direct']:>7.3f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
