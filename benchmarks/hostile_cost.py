"""What a hostile server's definitions cost mcpshim (issue 41 items 1 and 2).

Time: the order hash and the readable drift of a tool whose description is one word of N
characters, against the plain definition hash of the same definition in the same rounds
(the anchor: one canonical JSON and one SHA-256). With --against REV the order hash of
REV's contract/canon.py is timed in the same rounds too (up to --old-max characters: it
was quadratic). Then the real `mcpshim run --mcp` over a hand-written server whose tool
has a --description-mb description: the time from tools/list sent to answered, against the
same session with a short description.

Memory: `mcpshim run --mcp` over the same server listing --tools tools (100,000 make a
7.5 MB line), and the anchor session listing 10: the peak resident memory (VmHWM) of each
of mcpshim's processes (supervisor, pump, recorder), and of `review`, `log --format json`
and `sessions` over the session, each as peak/message and (peak - anchor's)/message.

    python benchmarks/hostile_cost.py [--rounds 5] [--tools 100000] [--against REV]
                                      [--src DIR] [--only hashes|listing|memory]

--src DIR runs the sessions and commands with DIR/src first on PYTHONPATH (another
checkout, e.g. `git worktree add /tmp/old REV`), for a before/after of the same machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from throwaway import throwaway_home

REPO = Path(__file__).resolve().parents[1]
SERVER = REPO / "tests" / "fixtures" / "hostile_server.py"
MCPSHIM = [sys.executable, "-m", "mcpshim"]


def _median_s(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _old_canon(rev: str) -> Any:
    src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:src/mcpshim/contract/canon.py"],
                         capture_output=True, check=True).stdout  # fmt: skip
    path = Path(tempfile.mkdtemp()) / "old_canon.py"
    path.write_bytes(src)
    spec = importlib.util.spec_from_file_location("old_canon", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def hashes(rounds: int, against: str, old_max: int) -> None:
    from mcpshim.contract.canon import definition_hash, order_hash
    from mcpshim.contract.drift import drift

    old = _old_canon(against) if against else None
    print("== hashing one tool whose description is one word of N characters (median s)")
    head = f"{'N':>10} {'anchor':>9} {'order':>9} {'drift':>9} {'order/anchor':>13}"
    print(head + (f" {'old order':>10} {'old/anchor':>11}" if old else ""))
    for n in (20_000, 40_000, 1 << 20, 10 << 20):
        tool = {"name": "t", "description": "x" * n, "inputSchema": {"type": "object"}}
        other = {**tool, "description": "y" + "x" * (n - 1)}
        anchor = _median_s(lambda: definition_hash("tool", tool), rounds)  # noqa: B023
        order = _median_s(lambda: order_hash("tool", tool), rounds)  # noqa: B023
        diff = _median_s(lambda: drift(tool, other), rounds)  # noqa: B023
        line = f"{n:>10} {anchor:>9.4f} {order:>9.4f} {diff:>9.4f} {order / anchor:>13.1f}"
        if old is not None:
            if n <= old_max:
                was = _median_s(lambda: old.order_hash("tool", tool), 1)  # noqa: B023
                line += f" {was:>10.2f} {was / anchor:>11.0f}"
            else:
                line += f" {'(skipped)':>10}"
        print(line, flush=True)


class Client:
    """A raw MCP client on `mcpshim run --mcp` over the hostile server."""

    def __init__(self, env: dict[str, str], *opts: str) -> None:
        argv = [*MCPSHIM, "run", "--mcp", *opts, "--", sys.executable, str(SERVER)]
        self.proc = subprocess.Popen(argv, env={**os.environ, **env}, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
        self.buf = b""

    def ask(self, msg: dict[str, Any]) -> bytes:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            select.select([fd], [], [], 600)
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise SystemExit("the session ended")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def session(self) -> float:
        """initialize, then tools/list: seconds to the listing, the listing's size."""
        self.ask({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}})  # fmt: skip
        t0 = time.perf_counter()
        self.size = len(self.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        return time.perf_counter() - t0

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(900)


def listing_time(description_mb: int) -> None:
    print(f"\n== run --mcp: tools/list answered, one tool of {description_mb} MB (s)")
    got = {}
    for label, size in (("anchor (short)", 0), (f"{description_mb} MB", description_mb << 20)):
        client = Client({"FIXTURE_DESCRIPTION_BYTES": str(size)})
        got[label] = client.session()
        t0 = time.perf_counter()
        client.close()
        ended = time.perf_counter() - t0
        print(f"{label:>16}: listed in {got[label]:.3f} s, run ended {ended:.2f} s after the "
              "client closed (the recorder's work)", flush=True)  # fmt: skip


def _hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) << 10
    except OSError:
        pass
    return 0


def _watch(root: int, peaks: dict[str, int], stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            procs = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
        except psutil.Error:
            return
        for p in procs:
            try:
                name = p.name()
            except psutil.Error:
                continue
            if name.startswith("mcpshim-") or p.pid == root:
                key = "supervisor" if p.pid == root else name
                peaks[key] = max(peaks.get(key, 0), _hwm(p.pid))
        time.sleep(0.01)


def _peak_of(argv: list[str]) -> int:
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], capture_output=True, text=True,
                          check=False)  # fmt: skip
    return int(done.stderr.strip().splitlines()[-1]) << 10


def memory(tools: int) -> None:
    print(f"\n== memory: a tools/list of {tools} tools (VmHWM, MiB; ratios to the message)")
    rows: dict[str, dict[str, int]] = {}
    size = {}
    for label, n in (("anchor", 10), ("listing", tools)):
        log = Path(os.environ["HOME"]) / label
        env = {"FIXTURE_TOOLS": str(n)}
        client = Client(env, "--log-dir", str(log))
        peaks: dict[str, int] = {}
        stop = threading.Event()
        th = threading.Thread(target=_watch, args=(client.proc.pid, peaks, stop), daemon=True)
        th.start()
        client.session()
        size[label] = client.size
        client.close()
        stop.set()
        th.join()
        for cmd in (["review"], ["review", "--session", "last"], ["log", "--format", "json"],
                    ["sessions"]):  # fmt: skip
            peaks[" ".join(cmd)] = _peak_of([*MCPSHIM, *cmd, "--log-dir", str(log)])
        rows[label] = peaks
    msg = size["listing"]
    print(f"the listing: {msg / 2**20:.1f} MiB ({tools} tools); the anchor's: {size['anchor']} B")
    print(f"{'process':>20} {'anchor':>8} {'listing':>8} {'peak/msg':>9} {'(peak-anchor)/msg':>18}")
    for key, peak in rows["listing"].items():
        base = rows["anchor"].get(key, 0)
        print(f"{key:>20} {base / 2**20:>8.1f} {peak / 2**20:>8.1f} {peak / msg:>9.1f} "
              f"{(peak - base) / msg:>18.1f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tools", type=int, default=100_000)
    ap.add_argument("--description-mb", type=int, default=10)
    ap.add_argument("--against", default="", help="also time REV's order hash")
    ap.add_argument("--old-max", type=int, default=40_000, help="longest text REV gets")
    ap.add_argument("--only", choices=["hashes", "listing", "memory"], default="")
    ap.add_argument("--src", default="", help="another checkout whose src/ runs the CLI")
    args = ap.parse_args()
    if args.src:
        os.environ["PYTHONPATH"] = str(Path(args.src) / "src")
    if args.only in ("", "hashes"):
        hashes(args.rounds, args.against, args.old_max)
    if args.only in ("", "listing"):
        listing_time(args.description_mb)
    if args.only in ("", "memory"):
        memory(args.tools)


if __name__ == "__main__":
    throwaway_home()
    main()
