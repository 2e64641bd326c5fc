"""Scale of `mcpshim sessions` over a large exec log (issue 18: under 2 s at 1,000,000).

Writes an N-record log (default 1,000,000) as `run --mcp` sessions leave it: per session a
session-start, the families of review_scale.py under tool calls (an mcp-request and an
mcp-response around each), a session-end; rotated every 64 MiB as `run` rotates. Then runs,
each in a child process, in this order:

- baseline: what listing sessions took before the index, every record decoded by the reader
  (`execlog.iter_records`), ids and counts collected;
- cold: `mcpshim sessions` with no index (it builds one from the segments);
- warm: `mcpshim sessions` again (the index is up to date);
- append: 10,000 more records, then `mcpshim sessions` (reads only those).

Prints wall time, peak RSS and each ratio to the baseline of the same run.

    python benchmarks/sessions_scale.py [--records N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

from mcpshim.log.eventlog import encode_event

sys.path.insert(0, str(Path(__file__).parent))
from review_scale import Gen, measure
from throwaway import throwaway_home

SEGMENT = 64 << 20
BASELINE = """
import sys
from pathlib import Path
import mcpshim.log.execlog as execlog
from mcpshim.paths import Locations
loc = Locations(Path(sys.argv[1]), Path(sys.argv[2]))
seen = {}
for r in execlog.iter_records(loc, []):
    sid = r.session if isinstance(r, execlog.ExecRecord) else r.data.get("session")
    seen[sid] = seen.get(sid, 0) + 1
print(len(seen))
"""


def _records(gen: Gen, total: int, first: int = 0) -> Iterator[bytes]:
    n, sess_no = 0, first
    t = datetime(2025, 1, 1, tzinfo=timezone.utc) + timedelta(hours=first)
    while n < total:
        sess_no += 1
        sess = f"S{sess_no:05d}-{sess_no * 7919 % 100000:05d}"
        server, _ = gen.child()
        cwd = f"/home/dev/src/proj-{gen.rnd.randint(1, 40)}".encode()
        start = {"session": sess, "time": t.isoformat(), "name": f"srv{sess_no % 7}"}
        yield encode_event("session-start", {**start, "command": ["npx", "-y", "srv"]})
        yield encode_event("mcp-session", {"session": sess, "time": t.isoformat()})
        calls = gen.rnd.randint(200, 2000)
        for i in range(calls):
            when = (t + timedelta(seconds=i)).isoformat()
            req = {"session": sess, "time": when, "method": "tools/call", "id": i, "tool": "x"}
            yield encode_event("mcp-request", req)
            for r in gen.tool_call(server, cwd, sess):
                yield r
                n += 1
            yield encode_event("mcp-response", {"session": sess, "time": when, "id": i})
            n += 2
            if n >= total:
                break
        end = {"session": sess, "time": (t + timedelta(seconds=calls)).isoformat()}
        yield encode_event("session-end", {**end, "exit_status": 0, "survivors": 0})
        n += 3
        t += timedelta(hours=1)


def generate(log_dir: Path, shim_dir: Path, total: int) -> tuple[int, int]:
    """(bytes, segments): rotated segments of SEGMENT bytes, then the live log."""
    (log_dir / "boot").mkdir(parents=True, exist_ok=True)
    shim_dir.mkdir(parents=True, exist_ok=True)
    size, seg, written = 0, 0, 0
    fh = open(log_dir / "exec.log.000001", "wb")  # noqa: SIM115
    buf: list[bytes] = []
    for r in _records(Gen(shim_dir), total):
        buf.append(r)
        written += len(r)
        if len(buf) >= 50_000:
            size += fh.write(b"".join(buf))
            buf.clear()
        if written >= SEGMENT:
            size += fh.write(b"".join(buf))
            buf.clear()
            fh.close()
            seg += 1
            fh = open(log_dir / f"exec.log.{seg + 1:06d}", "wb")  # noqa: SIM115
            written = 0
    size += fh.write(b"".join(buf))
    fh.close()
    (log_dir / f"exec.log.{seg + 1:06d}").rename(log_dir / "exec.log")
    return size, seg + 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="Write the log here and keep it.")
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="mcpshim-sessions-"))
    log_dir, shim_dir = base / "log", base / "shims"
    t0 = time.perf_counter()
    size, segs = generate(log_dir, shim_dir, args.records)
    print(
        f"generated {args.records:,} records, {size / 1e6:.1f} MB in {segs} segments "
        f"in {time.perf_counter() - t0:.1f} s ({log_dir})"
    )
    cli = [sys.executable, "-m", "mcpshim"]
    listing = [*cli, "sessions", "--dir", str(shim_dir), "--log-dir", str(log_dir)]
    wall0, rss0, _, _, code, _ = measure(
        [sys.executable, "-c", BASELINE, str(shim_dir), str(log_dir)]
    )
    assert code == 0, "the baseline failed"
    print(f"{'baseline (decode all)':26} {wall0:6.2f} s  peak RSS {rss0:5.0f} MB")
    start = measure([*cli, "--version"]).wall
    print(f"{'mcpshim --version':26} {start:6.2f} s  (start-up: Python and the CLI's imports)")

    def show(label: str, argv: list[str]) -> None:
        wall, rss, _, _, code, _ = measure(argv)
        print(
            f"{label:26} {wall:6.2f} s  peak RSS {rss:5.0f} MB  exit {code}  "
            f"{wall / wall0:.3f} x baseline  (target < 2 s)"
        )

    show("sessions, cold (no index)", listing)
    show("sessions, warm", listing)
    gen = Gen(shim_dir, seed=2)
    with open(log_dir / "exec.log", "ab") as fh:
        fh.write(b"".join(_records(gen, 10_000, first=100_000)))
    show("sessions, +10,000 records", listing)
    done = subprocess.run([*listing, "--format", "json"], capture_output=True, check=True)
    out = json.loads(done.stdout)
    print(f"{len(out['sessions'])} sessions listed")
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    throwaway_home()
    main()
