"""What sealing costs: the follower `mcpshim run` starts, at 200 execs/s, and `log verify`
over a 1,000,000-record sealed log.

Sealing: a real follower (`mcpshim log seal --follow`) seals a log to which this process
appends shim-framed exec records at --rate per second (one O_APPEND write each, as shims
do), anchoring through an --anchor-cmd that appends to a file; its CPU time (utime+stime
from /proc) over busy windows, interleaved with idle windows of the same length (the
follower's floor: a stat per second) as the baseline. Target: under 1 % of a core. And
how far behind it seals: for each record, from its write to the time of the first seal
that covers it (the window an agent has; `run` promises at most about 1 s).

Verify: the review_scale generator's records, sealed every --per-seal records (about what
a 200 execs/s log gets from a follower sealing each second), then `mcpshim log verify`
(plain, and with the verifier) in a child process, against the floor of reading and
hashing the same bytes once. Target: under 5 s.

    python benchmarks/seal_cost.py [--rate 200] [--window 10] [--rounds 3] [--records N]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcpshim.paths import Locations
from mcpshim.seal import follow
from mcpshim.seal.record import find_seals
from mcpshim.seal.sealer import Sealer
from mcpshim.seal.state import AnchorConfig, default_state_path
from review_scale import Gen
from throwaway import throwaway_home

CLI = [sys.executable, "-m", "mcpshim"]
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _state(base: Path) -> Path:
    return base / "state" / "seal.json"


def sealing(base: Path, rate: int, window: float, rounds: int) -> None:
    loc = Locations(base / "shims", base / "log")
    records = Gen(loc.shim_dir).records(rate * int(window) * rounds + rate)
    loc.log_dir.mkdir(parents=True)
    anchors = base / "anchors"
    env = {**os.environ, "XDG_STATE_HOME": str(base / "xdg")}
    where = ["--dir", str(loc.shim_dir), "--log-dir", str(loc.log_dir)]
    init = [*CLI, "log", *where, "seal", "--init", "--anchor-cmd", f"cat >> {anchors}"]
    subprocess.run(init, env=env, check=True, capture_output=True)
    follower = subprocess.Popen(
        [*CLI, "log", *where, "seal", "--follow", "--stop-on-eof"],
        env=env,
        stdin=subprocess.PIPE,
    )
    fd = os.open(loc.log_file, os.O_WRONLY | os.O_APPEND)
    time.sleep(3)  # the follower's interpreter starts
    busy = idle = 0.0
    written: list[tuple[float, int]] = []  # (wall time, end offset) of each record
    for _ in range(rounds):
        c0 = cpu_s(follower.pid)
        t0 = time.monotonic()
        n = 0
        while (now := time.monotonic()) < t0 + window:
            due = int((now - t0) * rate)
            while n < due:
                os.write(fd, next(records))
                written.append((time.time(), os.lseek(fd, 0, os.SEEK_CUR)))
                n += 1
            time.sleep(0.002)
        busy += cpu_s(follower.pid) - c0
        time.sleep(1.5)  # the last records' seal lands in the busy window's account
        c0 = cpu_s(follower.pid)
        time.sleep(window)
        idle += cpu_s(follower.pid) - c0
    os.close(fd)
    assert follower.stdin is not None
    follower.stdin.close()
    follower.wait(60)
    spent = window * rounds
    seals = loc.log_file.read_bytes().count(b"\0R\0=1\0=seal\0=")
    print(
        f"sealing at {rate} execs/s over {rounds} x {window:.0f} s: follower CPU "
        f"{100 * busy / spent:.2f} % of a core (idle baseline {100 * idle / spent:.2f} %, "
        f"so sealing adds {100 * (busy - idle) / spent:.2f} %); {seals} seals "
        "(target < 1 %)"
    )
    done = subprocess.run(
        [*CLI, "log", *where, "verify"], env=env, capture_output=True, text=True, check=False
    )
    print("  the sealed log verifies" if done.returncode == 0 else done.stdout)
    lag = behind(loc.log_file.read_bytes(), written)
    p99 = statistics.quantiles(lag, n=100)[98]
    print(
        f"  behind: from a record's write to the seal that covers it, median "
        f"{statistics.median(lag):.2f} s, 99th percentile {p99:.2f} s, max {max(lag):.2f} s "
        f"over {len(lag)} records"
    )


def behind(data: bytes, written: list[tuple[float, int]]) -> list[float]:
    """Seconds from each record's write to the time of the first seal covering it."""
    ends = sorted(
        (seal.end, seal.ms / 1000) for _, _, seal, _ in find_seals(data, 0, len(data)) if seal
    )
    out, i = [], 0
    for t, end in written:  # both in order
        while i < len(ends) and ends[i][0] < end:
            i += 1
        if i < len(ends):
            out.append(ends[i][1] - t)
    return out


def big_log(base: Path, total: int, per_seal: int) -> tuple[Locations, str, dict[str, str]]:
    loc = Locations(base / "shims", base / "log")
    loc.log_dir.mkdir(parents=True)
    env = {**os.environ, "XDG_STATE_HOME": str(base / "xdg")}
    state = base / "xdg" / "mcpshim" / "seal"
    os.environ["XDG_STATE_HOME"] = env["XDG_STATE_HOME"]  # the path `log verify` looks at
    path = default_state_path(loc.log_dir)
    assert path.parent == state
    verifier, _ = follow.init(loc, path, AnchorConfig(mode="none"), False, lambda s: None, 60)
    sealer = Sealer(loc, path, print)
    assert sealer.start(5.0)
    buf: list[bytes] = []
    with open(loc.log_file, "ab") as fh:
        for rec in Gen(loc.shim_dir).records(total):
            buf.append(rec)
            if len(buf) == per_seal:
                fh.write(b"".join(buf))
                fh.flush()
                buf.clear()
                sealer.seal()
        fh.write(b"".join(buf))
    sealer.seal()
    sealer.close()
    return loc, verifier, env


def timed(argv: list[str], env: dict[str, str], stdin: str = "") -> tuple[float, int]:
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, input=stdin, capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, done.returncode


def verifying(base: Path, total: int, per_seal: int) -> None:
    t0 = time.perf_counter()
    loc, verifier, env = big_log(base, total, per_seal)
    size = loc.log_file.stat().st_size
    print(
        f"generated and sealed {total:,} records ({size / 1e6:.0f} MB, one seal per "
        f"{per_seal}) in {time.perf_counter() - t0:.0f} s"
    )
    t0 = time.perf_counter()
    h = hashlib.sha256()
    with open(loc.log_file, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    floor = time.perf_counter() - t0
    where = ["--dir", str(loc.shim_dir), "--log-dir", str(loc.log_dir)]
    plain, rc = timed([*CLI, "log", *where, "verify"], env)
    keyed, rc2 = timed([*CLI, "log", *where, "verify", "--key", "-"], env, verifier + "\n")
    start, _ = timed([*CLI, "--version"], env)
    print(f"read + SHA-256 of the log once, in this process: {floor:.2f} s")
    print(f"python -m mcpshim --version (interpreter start): {start:.2f} s")
    print(f"log verify:       {plain:.2f} s (exit {rc}; {plain / floor:.1f} x the floor)")
    print(f"log verify --key: {keyed:.2f} s (exit {rc2}; target < 5 s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=200)
    ap.add_argument("--window", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--per-seal", type=int, default=200)
    ap.add_argument("--skip-verify", action="store_true")
    ap.add_argument("--skip-sealing", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcpshim-seal-bench-") as tmp:
        if not args.skip_sealing:
            sealing(Path(tmp) / "a", args.rate, args.window, args.rounds)
        if not args.skip_verify:
            verifying(Path(tmp) / "b", args.records, args.per_seal)


if __name__ == "__main__":
    throwaway_home()
    main()
