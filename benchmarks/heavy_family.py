"""A heavy real server under `mcpshim run`: Playwright's MCP server driving Chromium.

The official SDK's client drives Playwright MCP (tests/corpus/servers, Debian's chromium,
headless, on loopback only) through one 8-call session against a page server of this
process: navigate, snapshot, type, click, snapshot, navigate, screenshot, close. Each
round runs the session these ways, in a new random order: `direct` (the server as a client
starts it), `traced` (`mcpshim run --mcp`, tracing by default), `no-trace` (`mcpshim run
--mcp --no-trace`) and `strace` (the server under a bare `strace -f --seccomp-bpf -e
trace=execve`, the anchor of issue 42); `--tree NAME=DIR` adds `traced@NAME`, the traced
run of another checkout's src/ (a change against the code before it, in the same rounds).

Per session: wall (from spawning the command to its exit), CPU (user + system of the
whole tree: this process is a child subreaper, so every descendant is reaped here or
below and counted), `start` (spawn to the first byte the client reads: the answer to
`initialize`) and `stop` (the client closing the server's stdin to the command's exit).
Printed: medians, and per mode the ratios to `direct` of the same round (median and the
spread over the rounds), `start` and `stop` as milliseconds over direct's of the same
round, with the load average of the rounds. Then the traced run's wall over bare strace's,
and each mode's family's end (the close to the last of the family reaped: `run` and
`strace -f` wait for their family, a direct server's browser may end after the server)
over direct's: a stop that waits for the family measured against the family's end.

`--variants` adds the server under strace alone with other options, into /dev/null (no
mcpshim): `strace:bare` (the anchor's options), `strace:run` (run's command line,
trace.strace.strace_argv), `strace:run-nosend` (without sendto, sendmsg, sendmmsg),
`strace:run-nonet` (without the socket calls), `strace:run-s300` (-s 300 instead of
Linux's MAX_ARG_STRLEN), `strace:run-nosignal` (-e signal=none): what each of strace's
options costs the session (docs/performance.md, "A heavy family").

`--start-stop` drives sessions of `initialize` and `tools/list` only (Chromium never
starts): the start and stop columns over many cheap rounds, where a whole session's
seconds of noise would hide them. Each of its rounds also times two anchors, spawn to exit:
`python -c pass` (this interpreter: what `run` is before it can start anything) and
`strace -f --seccomp-bpf -e trace=execve /bin/true` (a tracer's own start and end); the
start column is printed again less the same round's anchors (the interpreter's for every
mode of `run`, strace's too for a traced one): what `run` itself adds. Its client waits
PAUSE_S after `tools/list` before it closes, as an agent does before its first call: `run`
loads the rest of itself once the server has answered (supervise.launch), and a close
within that load (0.1 s of CPU) would time the load, not the stop; `--no-pause` closes at
once and shows what such a client waits.

Where chromium, node, the pinned server or strace is missing it says so and exits 2:
nothing is measured, nothing passes.

    .venv/bin/python benchmarks/heavy_family.py [--rounds 5] [--modes direct,traced,...]
        [--tree NAME=DIR ...] [--variants run,run-nosend,...] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import http.server
import json
import os
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.session import ClientSession
from mcp.shared.message import SessionMessage

from throwaway import throwaway_home

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ROOT / "tests" / "corpus" / "servers"
SERVER_BIN = SERVERS / "node_modules" / ".bin" / "playwright-mcp"
CHROMIUM = "/usr/bin/chromium"
PAGE = (
    b"""<!doctype html><html><head><title>mcpshim form</title></head><body>
<h1>A form</h1><label for=name>Name</label> <input id=name>
<button id=go onclick="document.getElementById('out').textContent =
 'Hello, ' + document.getElementById('name').value">Go</button><p id=out></p>
<ul>"""
    + b"".join(b"<li>item %d</li>" % i for i in range(40))
    + b"</ul></body></html>"
)
NEXT = (
    b"""<!doctype html><html><head><title>second page</title></head><body>
<h1>Second page</h1><p>"""
    + b"text " * 400
    + b"</p></body></html>"
)
MODES = ("direct", "traced", "no-trace", "strace")
_PR_SET_CHILD_SUBREAPER = 36


def _run_options(
    net: bool = True, drop: tuple[str, ...] = (), extra: tuple[str, ...] = (), s: str = ""
) -> Any:
    """strace's options as `run` gives them (trace.strace), changed, into /dev/null."""

    def argv(strace: str) -> list[str]:
        from mcpshim.trace import strace as st

        full = st.strace_argv(strace, os.devnull, ["X"], net=net)[1:-2]
        calls = full[full.index("-e") + 1].removeprefix("trace=").split(",")
        full[full.index("-e") + 1] = "trace=" + ",".join(c for c in calls if c not in drop)
        if s:
            full[full.index("-s") + 1] = s
        return [*full, *extra]

    return argv


#: strace's options measured against each other (--variants): what each costs the session
VARIANTS = {
    "bare": lambda _s: ["-f", "--seccomp-bpf", "-e", "trace=execve", "-o", os.devnull],
    "run": _run_options(),
    "run-nonet": _run_options(net=False),
    "run-nosend": _run_options(drop=("sendto", "sendmsg", "sendmmsg")),
    "run-s300": _run_options(s="300"),
    "run-nosignal": _run_options(extra=("-e", "signal=none")),
}


def calls(base: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("browser_navigate", {"url": base + "/"}),
        ("browser_snapshot", {}),
        ("browser_type", {"target": "#name", "element": "Name box", "text": "mcpshim"}),
        ("browser_click", {"target": "#go", "element": "Go button"}),
        ("browser_snapshot", {}),
        ("browser_navigate", {"url": base + "/next"}),
        ("browser_take_screenshot", {"type": "png", "scale": "css"}),
        ("browser_close", {}),
    ]


class _Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = {"/": PAGE, "/next": NEXT}.get(self.path.split("?")[0])
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *_a: Any) -> None:
        pass


def page_server() -> str:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}"


# ---- what is needed ------------------------------------------------------------------------


def missing() -> str:
    """Why the session cannot run here ('' when it can)."""
    if not os.access(CHROMIUM, os.X_OK):
        return f"chromium is not installed ({CHROMIUM}; Debian's package `chromium`)"
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node and npm are not installed"
    if shutil.which("strace") is None:
        return "strace is not installed (the bare anchor and the traced run need it)"
    if not SERVER_BIN.exists():
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
                              cwd=SERVERS, capture_output=True, text=True, check=False)  # fmt: skip
        if done.returncode != 0 or not SERVER_BIN.exists():
            return f"cannot install the pinned Playwright MCP in {SERVERS}: {done.stderr[-300:]}"
    return ""


# ---- one session -------------------------------------------------------------------------


@dataclass
class Marks:
    spawn: float = 0.0
    first: float = 0.0  # the first byte the client read
    close: float = 0.0  # the client closed the server's stdin
    exit: float = 0.0
    calls: list[float] = field(default_factory=list)


Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


@contextlib.asynccontextmanager
async def timed_stdio(
    argv: list[str], env: dict[str, str], cwd: str, errlog: Any, marks: Marks
) -> AsyncIterator[Streams]:
    """The SDK's stdio transport, with its moments marked: the same newline-delimited
    JSON-RPC, the server in a session of its own; closing stdin ends it, and the exit is
    seen through a pidfd (not the SDK's 10 ms poll)."""
    marks.spawn = time.perf_counter()
    proc = await anyio.open_process(argv, env=env, cwd=cwd, stderr=errlog, start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None
    pidfd = os.pidfd_open(proc.pid)
    rs_w, rs = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    ws, ws_r = anyio.create_memory_object_stream[SessionMessage](16)

    async def reader() -> None:
        assert proc.stdout is not None
        buf = b""
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                                 anyio.BrokenResourceError):  # fmt: skip
            while True:
                chunk = await proc.stdout.receive()
                if not marks.first:
                    marks.first = time.perf_counter()
                *lines, buf = (buf + chunk).split(b"\n")
                for line in lines:
                    msg = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    await rs_w.send(SessionMessage(msg))

    async def writer() -> None:
        assert proc.stdin is not None
        async for m in ws_r:
            data = m.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
            await proc.stdin.send(data.encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield rs, ws
        finally:
            marks.close = time.perf_counter()
            await proc.stdin.aclose()
            with anyio.move_on_after(30):
                await anyio.wait_readable(pidfd)
            marks.exit = time.perf_counter()
            if proc.returncode is None and not _exited(pidfd):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            os.close(pidfd)
            await proc.stdout.aclose()
            await proc.wait()  # reaped by asyncio's watcher, never by reap_all
            await rs_w.aclose()
            tg.cancel_scope.cancel()


def _exited(pidfd: int) -> bool:
    import select

    return bool(select.select([pidfd], [], [], 0)[0])


async def drive(
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    base: str,
    errlog: Any,
    browse: bool = True,
    pause: float = 0.0,
) -> Marks:
    marks = Marks()
    async with (
        timed_stdio(argv, env, cwd, errlog, marks) as (read, write),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        await s.list_tools()
        if pause:
            await anyio.sleep(pause)
        for name, args in calls(base) if browse else ():
            c0 = time.perf_counter()
            res = await s.call_tool(name, args)
            marks.calls.append(time.perf_counter() - c0)
            if res.is_error:
                text = " ".join(getattr(c, "text", "") for c in res.content)
                raise RuntimeError(f"{name}: {text[:400]}")
    return marks


def reap_all(timeout: float = 20.0) -> float:
    """Every descendant left (orphans re-parented here, the subreaper) reaped: its CPU is
    then in RUSAGE_CHILDREN. Those still alive after `timeout` are killed first. Returns
    when the last was reaped (perf_counter, within 2 ms; 0.0: none was left)."""
    deadline = time.monotonic() + timeout
    last = 0.0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return last
        if pid:
            last = time.perf_counter()
            continue
        if time.monotonic() > deadline:
            for kid in _children():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(kid, signal.SIGKILL)
        time.sleep(0.002)


def _children() -> list[int]:
    me, out = os.getpid(), []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (d / "stat").read_bytes()
                if int(stat[stat.rfind(b")") + 2 :].split()[1]) == me:
                    out.append(int(d.name))
    return out


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


@dataclass(frozen=True)
class Result:
    wall: float
    cpu: float
    start: float
    stop: float
    calls: float  # calls 2 to 8: the browser is up
    load: float
    #: the client closing stdin to the family's end: the command's exit, or the last of its
    #: descendants reaped here after it (a direct server's browser outlives it a moment;
    #: `run` and `strace -f` wait for their family)
    end: float = 0.0


def one(
    argv: list[str],
    env: dict[str, str],
    base: str,
    work: Path,
    browse: bool = True,
    pause: float = 0.0,
) -> Result:
    cpu0, load = _cpu(), os.getloadavg()[0]
    ws = Path(tempfile.mkdtemp(dir=work))
    with open(work / "server.stderr", "a") as err:
        marks = anyio.run(drive, argv, env, str(ws), base, err, browse, pause)
    gone = max(reap_all(), marks.exit)
    shutil.rmtree(ws, ignore_errors=True)
    return Result(marks.exit - marks.spawn, _cpu() - cpu0, marks.first - marks.spawn,
                  marks.exit - marks.close, sum(marks.calls[1:]) or 1.0, load,
                  gone - marks.close)  # fmt: skip


# ---- the rounds --------------------------------------------------------------------------


def commands(
    modes: list[str], trees: dict[str, Path], variants: Sequence[str] = ()
) -> dict[str, tuple[list[str], dict[str, str]]]:
    server = [str(SERVER_BIN), "--executable-path", CHROMIUM, "--headless", "--no-sandbox",
              "--isolated", "--output-dir", "out"]  # fmt: skip
    strace = shutil.which("strace") or "strace"
    run = [sys.executable, "-m", "mcpshim", "run", "--mcp"]
    out: dict[str, tuple[list[str], dict[str, str]]] = {}
    every = {
        "direct": server,
        "traced": [*run, "--", *server],
        "no-trace": [*run, "--no-trace", "--", *server],
        "strace": [strace, "-f", "--seccomp-bpf", "-e", "trace=execve", "-o", os.devnull,
                   "--", *server],
    }  # fmt: skip
    for m in modes:
        out[m] = (every[m], {})
    for v in variants:
        out[f"strace:{v}"] = ([strace, *VARIANTS[v](strace), "--", *server], {})
    for name, src in trees.items():
        out[f"traced@{name}"] = ([*run, "--", *server], {"PYTHONPATH": str(src / "src")})
        if "no-trace" in modes:
            out[f"no-trace@{name}"] = ([*run, "--no-trace", "--", *server],
                                       {"PYTHONPATH": str(src / "src")})  # fmt: skip
    return out


#: --start-stop: the client's wait after tools/list before it closes (module docstring)
PAUSE_S = 1.0
#: the anchors of --start-stop, spawn to exit, timed in every round
ANCHORS = {
    "anchor:python": [sys.executable, "-c", "pass"],
    "anchor:strace": [
        "strace",
        "-f",
        "--seccomp-bpf",
        "-e",
        "trace=execve",
        "-o",
        os.devnull,
        "true",
    ],
}


def anchor(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - t0


def report_anchored(got: dict[str, list[Result]], anchors: dict[str, list[float]]) -> None:
    """The start over direct's (and a traced one's over bare strace's: a tracer's stops in
    the server's own start), less what the same round's anchors took."""
    py, st = anchors["anchor:python"], anchors["anchor:strace"]
    print(f"anchors, spawn to exit: python -c pass {_ms([x * 1e3 for x in py])[1:]} ms, "
          f"strace -f /bin/true {_ms([x * 1e3 for x in st])[1:]} ms")  # fmt: skip
    for mode, rs in got.items():
        if mode in ("direct", "strace") or mode.startswith("strace:"):
            continue
        traced = not mode.startswith("no-trace")
        less = [p + (s if traced else 0.0) for p, s in zip(py, st, strict=True)]
        over = [(b.start - a.start - x) * 1e3 for a, b, x in zip(got["direct"], rs, less,
                                                                  strict=True)]  # fmt: skip
        what = "python and strace" if traced else "python"
        print(f"{mode:18} start over direct, less {what}: {_ms(over)} ms")
        if traced and "strace" in got:
            bare = [(b.start - a.start - p) * 1e3 for a, b, p in zip(got["strace"], rs, py,
                                                                      strict=True)]  # fmt: skip
            print(f"{mode:18} start over bare strace's, less python: {_ms(bare)} ms")


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def report(got: dict[str, list[Result]]) -> None:
    base = got["direct"]
    loads = [r.load for rs in got.values() for r in rs]
    print(f"\n{len(base)} rounds, load average {min(loads):.2f} to {max(loads):.2f}")
    d = base
    print(f"direct: wall {statistics.median([r.wall for r in d]):.2f} s, CPU "
          f"{statistics.median([r.cpu for r in d]):.2f} s, start "
          f"{statistics.median([r.start for r in d]) * 1e3:.0f} ms, stop "
          f"{statistics.median([r.stop for r in d]) * 1e3:.0f} ms, calls 2-8 "
          f"{statistics.median([r.calls for r in d]):.2f} s")  # fmt: skip
    head = f"{'mode':18} {'wall x direct':>20} {'CPU x direct':>20} {'calls 2-8 x':>20} "
    print(head + f"{'start +ms':>20} {'stop +ms':>20}")
    for mode, rs in got.items():
        if mode == "direct":
            continue
        pairs = list(zip(d, rs, strict=True))
        wall = [b.wall / a.wall for a, b in pairs]
        cpu = [b.cpu / a.cpu for a, b in pairs]
        per = [b.calls / a.calls for a, b in pairs]
        start = [(b.start - a.start) * 1e3 for a, b in pairs]
        stop = [(b.stop - a.stop) * 1e3 for a, b in pairs]
        print(f"{mode:18} {spread(wall):>20} {spread(cpu):>20} {spread(per):>20} "
              f"{_ms(start):>20} {_ms(stop):>20}")  # fmt: skip
    if "strace" in got and "traced" in got:
        ratio = [b.cpu / a.cpu for a, b in zip(got["strace"], got["traced"], strict=True)]
        print(f"traced CPU / bare strace CPU, same round: {spread(ratio)}")
        ratio = [b.wall / a.wall for a, b in zip(got["strace"], got["traced"], strict=True)]
        print(f"traced wall / bare strace wall, same round: {spread(ratio)}")
    ends = [r.end * 1e3 for r in d]
    print(f"direct's family ends {_ms([(r.end - r.stop) * 1e3 for r in d])} ms after its "
          f"command exits ({statistics.median(ends):.0f} ms after the close)")  # fmt: skip
    for mode, rs in got.items():
        if mode != "direct":
            late = [(b.end - a.end) * 1e3 for a, b in zip(d, rs, strict=True)]
            print(f"{mode:18} family's end over direct's: {_ms(late)} ms")


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs):+.0f} ({min(xs):+.0f} to {max(xs):+.0f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--variants", default="", help="strace option sets: " + ",".join(VARIANTS))
    ap.add_argument("--json", type=Path, help="also write every session's figures here")
    ap.add_argument("--no-pause", action="store_true",
                    help="--start-stop: close right after tools/list (no PAUSE_S)")  # fmt: skip
    ap.add_argument("--start-stop", action="store_true",
                    help="sessions of initialize and tools/list only (no browser): the start "
                         "and stop columns, over more rounds")  # fmt: skip
    opts = ap.parse_args()
    why = missing()
    if why:
        print(f"heavy_family: cannot run the Playwright session here: {why}", file=sys.stderr)
        return 2
    modes = [m for m in opts.modes.split(",") if m]
    if "direct" not in modes or any(m not in MODES for m in modes):
        ap.error(f"--modes: a list of {', '.join(MODES)}, direct among them")
    trees = {k: Path(v).resolve() for k, v in (t.split("=", 1) for t in opts.tree)}
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    base = page_server()
    names = ("HOME", "PATH", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")
    env = {k: os.environ[k] for k in names if k in os.environ}
    cmds = commands(modes, trees, [v for v in opts.variants.split(",") if v])
    got: dict[str, list[Result]] = {m: [] for m in cmds}
    anchors: dict[str, list[float]] = {k: [] for k in ANCHORS}
    rnd = random.Random(42)
    with tempfile.TemporaryDirectory(prefix="mcpshim-heavy-") as tmp:
        work = Path(tmp)
        for r in range(opts.rounds + 1):  # round 0 warms the caches and is not counted
            order = list(cmds) + (list(ANCHORS) if opts.start_stop else [])
            rnd.shuffle(order)
            for mode in order:
                if mode in ANCHORS:
                    took = anchor(ANCHORS[mode], env)
                    if r:
                        anchors[mode].append(took)
                    continue
                argv, extra = cmds[mode]
                pause = PAUSE_S if opts.start_stop and not opts.no_pause else 0.0
                res = one(argv, {**env, **extra}, base, work, not opts.start_stop, pause)
                if r:
                    got[mode].append(res)
                print(f"round {r} {mode:18} wall {res.wall:6.2f} s CPU {res.cpu:6.2f} s start "
                      f"{res.start * 1e3:5.0f} ms stop {res.stop * 1e3:5.0f} ms load "
                      f"{res.load:.2f}", file=sys.stderr, flush=True)  # fmt: skip
    report(got)
    if opts.start_stop:
        report_anchored(got, anchors)
    if opts.json:
        opts.json.write_text(json.dumps({m: [r.__dict__ for r in rs] for m, rs in got.items()}))
    return 0


if __name__ == "__main__":
    throwaway_home()
    raise SystemExit(main())
