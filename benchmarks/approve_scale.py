"""Cost of `mcpshim approve` on a relayed session with many execs.

Writes a log holding one session relayed with --mcp: its initialize and tools/list records,
N/5 tool calls, and N exec records framed exactly as the shims frame them (each call runs
a chain of five: npm test, node, sh -c, node, git), with real executables of this machine
as targets, so identities are real lookups (one dpkg-query batch, the hashes). Then runs
`mcpshim approve --yes` in a child process and prints its wall time against a baseline
measured in the same run: `mcpshim rules` (the interpreter and CLI start-up, nothing read).

    python benchmarks/approve_scale.py [--execs N] [--keep DIR]

Target (the issue's acceptance): approve on 1,000 execs in under 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcpshim.log import execlog
from mcpshim.log.eventlog import encode_event
from throwaway import throwaway_home

BOOT = "5f1c0de0-0000-4000-8000-0000000000ab"
BTIME = 1_767_225_600.0  # 2026-01-01T00:00:00Z
HZ = execlog.CLK_TCK
SESSION = "20260101T000000Z-benchmark"


def _which(name: str) -> bytes:
    return (shutil.which(name) or f"/usr/bin/{name}").encode()


def _exec(
    pid: int, ppid: int, ticks: int, shim: str, args: list[bytes], cwd: bytes, session: str = ""
) -> bytes:
    """An exec record as the sh shim frames it (of this benchmark's session by default)."""
    n_extra = int(getattr(execlog, "_EXEC_FIELDS", 15)) - 15
    fields = [
        f"{BTIME:.6f}".encode(),
        f"{ticks / HZ:.2f}".encode(),
        BOOT.encode(),
        str(pid).encode(),
        str(ppid).encode(),
        str(ticks).encode(),
        b"",
        cwd,
        shim.encode(),
        _which(shim),
        b"/home/dev/.local/share/mcpshim/shims/" + shim.encode(),
        (session or SESSION).encode(),
        b"/home/dev/.local/share/mcpshim/shims:/usr/bin:/bin",
        b"",
        *([b""] * n_extra),
        str(len(args)).encode(),
        *args,
    ]
    return execlog.encode_record("exec", fields)


def _iso(ticks: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(BTIME + ticks / HZ, timezone.utc).isoformat()


def session_head(session: str, cwd: bytes, names: list[str], server: int = 4000) -> list[bytes]:
    """The records a relayed session starts with: its start, the server seen by the
    sampler (pid `server`, start ticks 1000), initialize and tools/list of `names`."""
    tools = [
        {"name": n, "sha256": f"{i:064x}", "definition": {"name": n, "description": f"{n}."}}
        for i, n in enumerate(names)
    ]
    return [
        encode_event("mcp-session", {"session": session, "time": _iso(900)}),
        encode_event("session-start", {
            "session": session, "time": _iso(950), "name": "bench", "child_pid": server,
            "child_start": 1000, "command": ["node", "server.js"], "user": "dev",
            "uid": 1000, "credential_env": [], "cwd": cwd.decode(), "boot_id": BOOT,
        }),
        encode_event("observed", {
            "session": session, "time": _iso(1001), "pid": server, "ppid": 3999,
            "start": 1000, "parent_start": None, "exe": _which("node").decode(),
            "cmdline": ["node", "server.js"], "cwd": cwd.decode(), "uid": 1000,
            "credential_env": [], "boot_id": BOOT,
        }),
        encode_event("mcp-initialize", {
            "session": session, "time": _iso(1100), "server_name": "bench", "server_sha256": "0",
            "server_version": "1", "protocol_version": "2025-06-18", "instructions": "",
        }),
        encode_event("mcp-tools", {"session": session, "time": _iso(1101), "tools": tools,
                                   "cursor": None}),
    ]  # fmt: skip


def write_boot(log_dir: Path) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "boot").mkdir(exist_ok=True)
    (log_dir / "boot" / BOOT).write_text(f"{BTIME:.6f}\n")


def generate(log_dir: Path, execs: int) -> None:
    """A log of one relayed session with `execs` exec records in execs/5 tool calls."""
    write_boot(log_dir)
    server, server_start = 4000, 1000
    cwd = b"/home/dev/src/proj"
    out = session_head(SESSION, cwd, ["run_test", "git_status", "search", "fmt", "echo"])
    pid, ticks = 5000, 1200
    for call in range(execs // 5):
        t0 = ticks
        req = {"session": SESSION, "time": _iso(t0), "direction": "client->server", "id": call,
               "method": "tools/call", "tool": "run_test", "arguments": {"n": call}}  # fmt: skip
        out.append(encode_event("mcp-request", req))
        npm, sh, node, git = pid, pid + 1, pid + 2, pid + 3
        out += [
            _exec(npm, server, t0 + 1, "npm", [b"test"], cwd),
            _exec(npm, server, t0 + 1, "node", [b"/usr/bin/npm", b"test"], cwd),
            _exec(sh, npm, t0 + 2, "sh", [b"-c", b"node test.js"], cwd),
            _exec(node, sh, t0 + 3, "node", [b"test.js"], cwd),
            _exec(git, node, t0 + 4, "git", [b"rev-parse", b"HEAD"], cwd),
        ]
        resp = {"session": SESSION, "time": _iso(t0 + 6), "direction": "server->client",
                "id": call, "method": "tools/call", "is_error": False, "error_code": None,
                "size": 100, "alive": [[server, server_start]]}  # fmt: skip
        out.append(encode_event("mcp-response", resp))
        pid, ticks = pid + 4, ticks + 10
    out.append(encode_event("session-end", {"session": SESSION, "time": _iso(ticks + 5),
                                            "exit_status": 0}))  # fmt: skip
    (log_dir / "exec.log").write_bytes(b"".join(out))


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"{argv[3]} failed: exit {done.returncode}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--execs", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="mcpshim-approve-"))
    log_dir, shim_dir = base / "log", base / "shims"
    generate(log_dir, args.execs)
    env = {**os.environ, "XDG_CONFIG_HOME": str(base / "cfg")}
    cli = [sys.executable, "-m", "mcpshim"]
    loc = ["--dir", str(shim_dir), "--log-dir", str(log_dir)]
    approve = [*cli, "approve", *loc, "--session", SESSION, "--yes", "--lock"]
    base_t = min(timed([*cli, "rules"], env) for _ in range(args.runs))
    walls = []
    for i in range(args.runs):
        walls.append(timed([*approve, str(base / f"l{i}.lock")], env))
    best = min(walls)
    print(
        json.dumps(
            {"execs": args.execs, "approve_s": round(best, 3), "cli_startup_s": round(base_t, 3),
             "ratio_to_startup": round(best / base_t, 2), "all_s": [round(w, 3) for w in walls]}
        )
    )  # fmt: skip


if __name__ == "__main__":
    throwaway_home()
    main()
