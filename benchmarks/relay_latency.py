"""Added latency of the MCP relay per message size (1 B to 1 MiB): medians and p95.

A line-echo peer answers each `tools/call` message with the same bytes. For each size the
round trip is timed directly and through each chosen path:

- relay / record: tests/fixtures/relayhost.py with the in-process pump threads, without
  and with recording (parse, redact, log write); frelay / frecord: the same with the
  pumps in a forked child (relaychild.ForkedRelay);
- run: the real path, `mcpshim run --mcp -- python <line-echo>` (supervisor, sampler,
  recorder; the forked pumps on Linux); run-threads: the same with the pumps forced back
  into the supervisor's threads (the fallback, and the design before relaychild);
- floor: the least any relay process adds, a bare two-thread os.splice relay that copies
  and records nothing; tee-floor: the least a relay that copies before passing on adds,
  the same waiting in tee(2) into a pipe of its own, splicing on, then reading the copy
  (what relaychild's pumps do before they file the copy).

--gap MS pauses between round trips: the machine goes idle as it does between an agent's
tool calls, and every process wakes cold. --sockets gives each path a socketpair for stdin
and stdout instead of pipes, as Node's child_process (and so Node-based MCP clients) does.

All paths run at once and take turns message by message, in a new random order each
round, so load from elsewhere on the machine falls on every path alike. Prints the direct
median and p95 (ms) and what each path adds to them.

    .venv/bin/python benchmarks/relay_latency.py [--rounds 300] [--modes run,floor] [--gap 0]
        [--sockets]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

from mcpshim.base import fdio
from throwaway import throwaway_home

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
# `mcpshim run` with the relay's pumps as threads in the supervisor (benchmark only).
THREADS = (
    "import sys\n"
    "from mcpshim.relay import child\n"
    "child.available = lambda: False\n"
    "from mcpshim.__main__ import main\n"
    "sys.argv[0] = 'mcpshim'\n"
    "main()\n"
)


def _bare_relay(setup: str, pump: str) -> str:
    """A relay process that does nothing but `pump(src, dst)` both ways (a Python script
    run as `python -c SCRIPT COMMAND...`), its command's stdin and stdout its pipes.
    `piped(src, step)` calls `step(pipe)` (pass on what is in `pipe`: how many bytes, 0 at
    the end) on `src` itself when it is a pipe, else on a pipe of its own that `src` is
    spliced into first (a socket: see relaychild on why not straight into the command)."""
    return (
        "import os, stat, sys, threading\n"
        "def piped(src, step):\n"
        "    if stat.S_ISFIFO(os.fstat(src).st_mode):\n"
        "        while step(src):\n"
        "            pass\n"
        "        return\n"
        "    mid_r, mid_w = os.pipe()\n"
        "    while (n := os.splice(src, mid_w, 1 << 20)):\n"
        "        while n > 0:\n"
        "            n -= step(mid_r)\n"
        f"{setup}"
        "r0, w0 = os.pipe()\n"
        "r1, w1 = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.dup2(r0, 0); os.dup2(w1, 1)\n"
        "    os.execv(sys.argv[1], sys.argv[1:])\n"
        "os.close(r0); os.close(w1)\n"
        f"{pump}"
        "threading.Thread(target=pump, args=(0, w0), daemon=True).start()\n"
        "pump(r1, 1)\n"
        "os.waitpid(pid, 0)\n"
    )


# A relay process and nothing else: what putting any process in the path costs.
FLOOR = _bare_relay(
    "",
    "def pump(src, dst):\n"
    "    piped(src, lambda pipe: os.splice(pipe, dst, 1 << 20))\n"
    "    os.close(dst)\n",
)
# The same, copying before it passes on: it waits in tee(2), which duplicates the bytes into
# a pipe of its own as it returns, splices them on, then reads the duplicate.
TEE_FLOOR = _bare_relay(
    "import ctypes\n"
    "tee = ctypes.CDLL(None, use_errno=True).tee\n"
    "tee.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint]\n"
    "tee.restype = ctypes.c_ssize_t\n",
    "def pump(src, dst):\n"
    "    copy_r, copy_w = os.pipe()\n"
    "    def step(pipe):\n"
    "        k = left = max(tee(pipe, copy_w, 1 << 20, 0), 0)\n"
    "        while left:  # all k: a splice moves only what dst has room for\n"
    "            left -= os.splice(pipe, dst, left)\n"
    "        os.read(copy_r, k)\n"
    "        return k\n"
    "    piped(src, step)\n"
    "    os.close(dst)\n",
)
SIZES = [1, 1 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20]
WARMUP = 5


def throwaway_env(home: str) -> dict[str, str]:
    """This environment with HOME and the XDG directories under `home`: the benchmark's
    shims and log never touch the user's."""
    xdg = {f"XDG_{k.upper()}_HOME": f"{home}/{k}" for k in ("data", "state", "config", "cache")}
    return {**os.environ, "HOME": home, **xdg}


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


class Peer:
    """One path under test: a running process, its stdout buffer and its round-trip times.
    Its stdin and stdout are pipes, or with `sockets` one end of a socketpair, as Node's
    child_process gives a server."""

    def __init__(
        self, argv: list[str], env: dict[str, str], err: IO[bytes], sockets: bool = False
    ) -> None:
        self.argv, self.err = argv, err
        self.sock: socket.socket | None = None
        if sockets:
            self.sock, theirs = socket.socketpair()
            with theirs:
                fd = theirs.fileno()
                self.proc = subprocess.Popen(argv, stdin=fd, stdout=fd, stderr=err, env=env)
            self.w = self.r = self.sock.fileno()
        else:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env
            )
            assert self.proc.stdin and self.proc.stdout
            self.w, self.r = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        self.buf = bytearray()
        self.times: list[float] = []

    def round_trip(self, msg: bytes, keep: bool) -> None:
        t0 = time.perf_counter()
        try:
            fdio.write_all(self.w, msg)
            read_line(self.r, self.buf)
        except (EOFError, BrokenPipeError):
            self.err.seek(0)
            sys.exit(f"{self.argv[:4]} failed:\n{self.err.read().decode(errors='replace')}")
        if keep:
            self.times.append((time.perf_counter() - t0) * 1000)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.shutdown(socket.SHUT_WR)
        else:
            assert self.proc.stdin
            self.proc.stdin.close()
        self.proc.wait()
        if self.sock is not None:
            self.sock.close()


def measure(
    modes: dict[str, list[str]],
    size: int,
    rounds: int,
    env: dict[str, str],
    gap: float = 0.0,
    sockets: bool = False,
) -> dict[str, list[float]]:
    """Round-trip times in ms per mode, warm-up rounds left out, modes taking turns in a new
    random order each round (none always follows the same other), `gap` ms apart."""
    rng = random.Random(size)
    with contextlib.ExitStack() as stack:
        peers = {
            m: Peer(argv, env, stack.enter_context(tempfile.TemporaryFile()), sockets)
            for m, argv in modes.items()
        }
        for peer in peers.values():
            stack.callback(peer.close)
        for i in range(rounds + WARMUP):
            msg = message(i, size)
            for peer in rng.sample(list(peers.values()), len(peers)):
                peer.round_trip(msg, i >= WARMUP)
                if gap:
                    time.sleep(gap / 1000)
    return {m: p.times for m, p in peers.items()}


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20)[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=300, help="round trips per size and mode")
    ap.add_argument(
        "--modes",
        default="run,floor",
        help="comma-separated paths besides direct: relay, record, frelay, frecord, run, "
        "run-threads, floor, tee-floor",
    )
    ap.add_argument("--gap", type=float, default=0.0, help="ms between round trips (0: none)")
    ap.add_argument(
        "--sockets",
        action="store_true",
        help="give each path a socketpair as stdin and stdout (as Node clients do), not pipes",
    )
    args = ap.parse_args()
    echo = [sys.executable, "-c", ECHO]
    with tempfile.TemporaryDirectory() as tmp:
        env = throwaway_env(tmp)
        log = str(Path(tmp) / "log")
        host = [sys.executable, str(RELAYHOST)]
        run = ["run", "--dir", str(Path(tmp) / "shims"), "--mcp", "--", *echo]
        every = {
            "direct": echo,
            "relay": [*host, tmp, "-", "bench", "--", *echo],
            "record": [*host, tmp, log, "bench", "--", *echo],
            "frelay": [*host, "--fork", tmp, "-", "bench", "--", *echo],
            "frecord": [*host, "--fork", tmp, log, "bench", "--", *echo],
            "run": [sys.executable, "-m", "mcpshim", *run],
            "run-threads": [sys.executable, "-c", THREADS, *run],
            "floor": [sys.executable, "-c", FLOOR, *echo],
            "tee-floor": [sys.executable, "-c", TEE_FLOOR, *echo],
        }
        chosen = [m.strip() for m in args.modes.split(",") if m.strip()]
        unknown = [m for m in chosen if m not in every or m == "direct"]
        if unknown:
            ap.error(f"unknown mode(s): {', '.join(unknown)}")
        modes = {"direct": every["direct"], **{m: every[m] for m in chosen}}
        head = f"{'size':>8} {'direct med':>10} {'p95':>7}"
        for m in chosen:
            head += f" {'+' + m + ' med':>16} {'p95':>7}"
        print(head + "   (ms; + = added to direct)")
        for size in SIZES:
            rounds = args.rounds if size <= 64 << 10 else max(20, args.rounds // 3)
            got = measure(modes, size, rounds, env, args.gap, args.sockets)
            med = {m: statistics.median(t) for m, t in got.items()}
            top = {m: p95(t) for m, t in got.items()}
            line = f"{size:>8} {med['direct']:>10.3f} {top['direct']:>7.3f}"
            for m in chosen:
                line += f" {med[m] - med['direct']:>16.3f} {top[m] - top['direct']:>7.3f}"
            print(line, flush=True)


if __name__ == "__main__":
    throwaway_home()
    main()
