"""Added latency of the MCP relay per message size (1 B to 1 MiB), as ratios.

A line-echo peer answers each `tools/call` message with the same bytes. For each size the
round trip is timed directly, through the relay without recording, and through the relay
while it records (parse, redact, log write) -- the path `mcpshim run --mcp` takes, minus
the supervisor's sampling. Prints medians and the relay's added time per round trip.

    .venv/bin/python benchmarks/relay_latency.py [--rounds 200]
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


def measure(argv: list[str], size: int, rounds: int, env: dict[str, str]) -> float:
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin and proc.stdout
    out, buf, times = proc.stdout.fileno(), bytearray(), []
    for i in range(rounds + 5):
        msg = message(i, size)
        t0 = time.perf_counter()
        proc.stdin.write(msg)
        proc.stdin.flush()
        read_line(out, buf)
        if i >= 5:  # warm-up
            times.append(time.perf_counter() - t0)
    proc.stdin.close()
    proc.wait()
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    echo = [sys.executable, "-c", ECHO]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "HOME": tmp}
        log = str(Path(tmp) / "log")
        modes = {
            "direct": echo,
            "relay": [sys.executable, str(RELAYHOST), tmp, "-", "bench", "--", *echo],
            "relay+record": [sys.executable, str(RELAYHOST), tmp, log, "bench", "--", *echo],
        }
        print(
            f"{'size':>8} {'direct ms':>10} {'relay ms':>9} {'+record ms':>11} "
            f"{'added ms':>9} {'ratio':>6}"
        )
        for size in SIZES:
            rounds = args.rounds if size <= 64 << 10 else max(20, args.rounds // 5)
            got = {m: measure(a, size, rounds, env) * 1000 for m, a in modes.items()}
            added = got["relay+record"] - got["direct"]
            print(
                f"{size:>8} {got['direct']:>10.3f} {got['relay']:>9.3f} "
                f"{got['relay+record']:>11.3f} {added:>9.3f} "
                f"{got['relay+record'] / got['direct']:>6.2f}"
            )


if __name__ == "__main__":
    main()
