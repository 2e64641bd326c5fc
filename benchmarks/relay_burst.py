"""Memory the relay child holds when a client writes faster than the recorder records.

The relay never holds a byte back and never drops a copy, so copies the channel's pipes
cannot take wait in the relay child's memory (relaychild's backlog) until the recorder has
them. This starts the real CLI (`mcpshim run --mcp`) over a server that reads and discards
its stdin, lets the recorder go idle (it then looks only once a second), writes --mib MiB of
--request-mib MiB requests as fast as the pipe takes them, and prints the relay child's
peak resident memory (VmHWM) against the burst: a ratio near 1 means the burst was held
whole.

    python benchmarks/relay_burst.py [--mib 200] [--request-mib 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

import psutil

from throwaway import throwaway_home

SINK = "import sys\nwhile sys.stdin.buffer.read(1 << 20):\n    pass\n"


def relay_child(supervisor: int, deadline: float = 30.0) -> psutil.Process:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        for child in psutil.Process(supervisor).children():
            if child.name() == "mcpshim-relay":
                return child
        time.sleep(0.05)
    sys.exit("the relay child did not start")


def peak_mib(proc: psutil.Process) -> float:
    with open(f"/proc/{proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=200, help="MiB written in the burst")
    ap.add_argument("--request-mib", type=int, default=4, help="MiB per request")
    args = ap.parse_args()
    if args.mib < 1 or not 1 <= args.request_mib <= args.mib:
        ap.error("--mib at least 1, --request-mib from 1 to --mib")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": "t", "arguments": {"x": "x" * (args.request_mib << 20)}}
    request = json.dumps(body).encode() + b"\n"
    count = args.mib // args.request_mib
    with tempfile.TemporaryDirectory() as tmp:
        env = {"HOME": tmp, "PATH": "/usr/bin:/bin"}
        argv = [sys.executable, "-m", "mcpshim", "run", "--dir", f"{tmp}/shims", "--mcp", "--"]
        proc = subprocess.Popen(
            [*argv, sys.executable, "-c", SINK],
            env=env,
            stdin=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin
        relay = relay_child(proc.pid)
        base = peak_mib(relay)
        time.sleep(2.5)  # the recorder's looks back off to once a second
        t0 = time.monotonic()
        for _ in range(count):
            proc.stdin.write(request)
        proc.stdin.flush()
        took = time.monotonic() - t0
        peak = peak_mib(relay)
        proc.stdin.close()
        proc.wait(120)
    burst = count * len(request) / (1 << 20)
    print(f"burst {burst:.0f} MiB in {took:.2f} s", end="; ")
    print(f"relay child peak {peak:.0f} MiB resident (idle {base:.0f})")
    print(f"held / burst: {(peak - base) / burst:.2f}")


if __name__ == "__main__":
    throwaway_home()
    main()
