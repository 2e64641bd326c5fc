"""What tracing the socket calls (issue 29) costs a connection, a send and a getsockopt.

A Python program makes N of one operation against a local listener (a separate, untraced
process that accepts and reads): `connect` (create_connection and close, blocking),
`connect-nb` (create_connection(timeout=5): non-blocking, poll, getsockopt(SO_ERROR), as
curl and node connect), `send` (1 KiB send()s on one connection: glibc's send is sendto,
a busy server's every reply), `send-64k` (64 KiB each, strace prints up to 128 KiB of every
buffer before the pump empties it), `getsockopt` (SO_TYPE: a call on the list only for
SO_ERROR's sake). Each runs these ways, in a new random order each round:
  direct            no tracer
  bare strace       `strace -f --seccomp-bpf -e trace=execve,connect` into a file (the
                    anchor issue 29 names), detached as run's (-DD -q)
  traced (no net)   run's strace before issue 29: no socket call on its list (-y)
  traced            run's strace now, drained by TraceRun.pump as the supervisor does
and for `connect` also the whole `mcpshim run` in this process, traced (the trace parsed
and its records written at the end) and `--no-trace`. The same program with 0 operations
runs in the same rounds; the cost of one operation is (median with N - median with 0) / N,
in wall time and CPU time (user + system of the program, strace and the pump).

    python benchmarks/trace_net_cost.py [-n 1000] [--rounds 5] [--ops connect,send,...]
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
import textwrap
from collections.abc import Callable
from functools import partial
from pathlib import Path

from mcpshim.paths import Locations
from mcpshim.supervise.supervisor import set_child_subreaper
from throwaway import throwaway_home
from trace_cost import measure, run_plain, run_session, run_supervised

LISTENER = textwrap.dedent(
    """
    import selectors, socket, sys
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4096)
    print(srv.getsockname()[1], flush=True)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            if key.fileobj is srv:
                c, _ = srv.accept()
                sel.register(c, selectors.EVENT_READ)
            elif not key.fileobj.recv(1 << 20):
                sel.unregister(key.fileobj)
                key.fileobj.close()
    """
)

OPS = {
    "connect": "for _ in range(n):\n    socket.create_connection(addr).close()",
    "connect-nb": "for _ in range(n):\n    socket.create_connection(addr, timeout=5).close()",
    "send": "s = socket.create_connection(addr)\nb = b'x' * 1024\n"
    "for _ in range(n):\n    s.send(b)",
    "send-64k": "s = socket.create_connection(addr)\nb = b'x' * 65536\n"
    "for _ in range(n // 10):\n    s.sendall(b)",
    "getsockopt": "s = socket.socket()\n"
    "for _ in range(n):\n    s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)",
}


def program(op: str, n: int, port: int) -> list[str]:
    code = f"import socket\nn = {n}\naddr = ('127.0.0.1', {port})\n{OPS[op]}\n"
    return [sys.executable, "-S", "-c", code]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1000, help="operations per program")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ops", default=",".join(OPS), help="comma-separated: " + ", ".join(OPS))
    opts = ap.parse_args()
    strace = shutil.which("strace")
    if strace is None:
        print("needs strace", file=sys.stderr)
        return 2
    ops = [o for o in opts.ops.split(",") if o]
    if unknown := set(ops) - set(OPS):
        print(f"unknown --ops: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    listener = subprocess.Popen([sys.executable, "-c", LISTENER], stdout=subprocess.PIPE)
    assert listener.stdout is not None
    port = int(listener.stdout.readline())
    env = {"PATH": "/usr/bin:/bin"}
    try:
        with tempfile.TemporaryDirectory(prefix="mcpshim-net-bench-") as tmp:
            root = Path(tmp)
            loc = Locations(root / "shims", root / "log")
            output = root / "strace.out"
            bare = [strace, "-DD", "-q", "-f", "--seccomp-bpf", "-o", str(output),
                    "-e", "trace=execve,connect", "--"]  # fmt: skip
            variants: dict[tuple[str, str, int], Callable[[], float]] = {}
            for op in ops:
                for k in (opts.n, 0):
                    cmd = program(op, k, port)
                    variants[(op, "direct", k)] = partial(run_plain, cmd, env)
                    variants[(op, "bare strace", k)] = partial(run_plain, [*bare, *cmd], env)
                    variants[(op, "traced (no net)", k)] = partial(
                        run_session, loc, strace, cmd, env, net=False
                    )
                    variants[(op, "traced", k)] = partial(run_session, loc, strace, cmd, env)
                    if op == "connect":
                        variants[(op, "run --no-trace", k)] = partial(
                            run_supervised, loc, None, cmd, env
                        )
                        variants[(op, "run", k)] = partial(run_supervised, loc, strace, cmd, env)
            set_child_subreaper()
            times, cpus = measure(variants, opts.rounds, output, random.Random(29))
    finally:
        listener.kill()
        listener.wait()
    print(f"{opts.n} operations per program (send-64k: {opts.n // 10}), median of {opts.rounds};"
          " per operation, the program with 0 operations subtracted")  # fmt: skip
    print(f"{'op':11} {'variant':16} {'wall us':>9} {'added':>8} {'cpu us':>9} {'added':>8}")
    for op in ops:
        div = opts.n // 10 if op == "send-64k" else opts.n
        per: dict[str, tuple[float, float]] = {}
        for (o, name, k), _ in times.items():
            if o != op or k != opts.n:
                continue
            wall = statistics.median(times[(o, name, k)]) - statistics.median(times[(o, name, 0)])
            c = statistics.median(cpus[(o, name, k)]) - statistics.median(cpus[(o, name, 0)])
            per[name] = (wall / div * 1e6, c / div * 1e6)
        for name, (wall, c) in per.items():
            ref = "run --no-trace" if name == "run" else "direct"
            add = "" if name == "direct" else f"{wall - per[ref][0]:8.1f}"
            cadd = "" if name == "direct" else f"{c - per[ref][1]:8.1f}"
            print(f"{op:11} {name:16} {wall:9.1f} {add:>8} {c:9.1f} {cadd:>8}")
        over = per["traced"][0] - per["bare strace"][0]
        net = per["traced"][0] - per["traced (no net)"][0]
        print(f"{op:11} traced over bare strace {over:+.1f} us, over no net {net:+.1f} us")
    print(f"(load average {' '.join(f'{x:.1f}' for x in os.getloadavg())})")
    return 0


if __name__ == "__main__":
    throwaway_home()
    raise SystemExit(main())
