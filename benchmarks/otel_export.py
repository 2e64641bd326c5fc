"""Cost of `mcpshim export otlp` on a relayed session with many execs.

Writes the log benchmarks/approve_scale.py writes (one session relayed with --mcp, N exec
records in N/5 tool calls, framed as the shims frame them), starts an OTLP/HTTP receiver on
localhost (it answers 200 and counts bytes), and runs `mcpshim export otlp` in a child
process; prints its wall and CPU time against a baseline measured in the same run: `mcpshim
rules` (the interpreter and CLI start-up, nothing read), and the load average beside them
(on a shared 2-core machine the wall time follows the load; the CPU time much less).

    python benchmarks/otel_export.py [--execs N] [--runs R]

Target (the issue's acceptance): export of a 10,000-exec session in under 5 s.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from throwaway import throwaway_home

_spec = importlib.util.spec_from_file_location(
    "approve_scale", Path(__file__).with_name("approve_scale.py")
)
assert _spec is not None and _spec.loader is not None
_scale = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_scale)
SESSION: str = _scale.SESSION


def generate(log_dir: Path, execs: int) -> None:
    _scale.generate(log_dir, execs)


class _Sink(BaseHTTPRequestHandler):
    received = 0

    def do_POST(self) -> None:
        _Sink.received += len(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of argv, CPU the child's user + system time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = float(_scale.timed(argv, dict(os.environ)))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--execs", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="mcpshim-otel-"))
    generate(base / "log", args.execs)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    cli = [sys.executable, "-m", "mcpshim"]
    export = [*cli, "export", "otlp", "--dir", str(base / "shims"), "--log-dir",
              str(base / "log"), "--session", SESSION, "--endpoint", url]  # fmt: skip
    load = os.getloadavg()[0]
    base_t = min(timed([*cli, "rules"])[0] for _ in range(args.runs))
    runs = [timed(export) for _ in range(args.runs)]
    server.shutdown()
    best = min(w for w, _ in runs)
    print(
        json.dumps(
            {"execs": args.execs, "export_s": round(best, 3), "cli_startup_s": round(base_t, 3),
             "ratio_to_startup": round(best / base_t, 2),
             "all_s": [round(w, 3) for w, _ in runs], "cpu_s": [round(c, 3) for _, c in runs],
             "otlp_bytes_per_run": _Sink.received // args.runs,
             "load": [round(load, 2), round(os.getloadavg()[0], 2)]}
        )
    )  # fmt: skip


if __name__ == "__main__":
    throwaway_home()
    main()
