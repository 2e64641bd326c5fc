"""`mcpshim snapshot PID`: the article's ps / pgrep -P / lsof procedure as one record.

A snapshot is evidence taken before anyone cleans up: the family of PID with identity
(pid + start time + boot id), owner, state, exe, the full command line (redacted), cwd,
open files and sockets. It is saved outside any workspace (the state directory) by default,
so the process being examined cannot edit it in place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil

from mcpshim import __version__
from mcpshim.base.display import b64_fields, dumps, escape, json_text, quote_argv
from mcpshim.errors import InputError
from mcpshim.log.execlog import current_boot_id
from mcpshim.log.redact import redact_argv
from mcpshim.paths import default_state_dir
from mcpshim.proc.procinfo import LINUX, proc_info

__all__ = [
    "SNAPSHOT_SCHEMA_ID",
    "ProcSnapshot",
    "Snapshot",
    "default_path",
    "render_json",
    "render_text",
    "take",
]

SNAPSHOT_SCHEMA_ID = "mcpshim.snapshot/1"


@dataclass(frozen=True)
class ProcSnapshot:
    pid: int
    ppid: int
    depth: int
    user: str
    uid: int | None
    start: datetime
    start_ticks: int | None
    elapsed_s: float
    status: str
    exe: bytes
    cmdline: tuple[bytes, ...]  # redacted
    redactions: tuple[str, ...]
    cwd: bytes
    credential_env: tuple[str, ...]
    files: tuple[tuple[int, bytes], ...]  # (fd, what it points at)
    sockets: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Snapshot:
    root: int
    time: datetime
    boot_id: str
    processes: tuple[ProcSnapshot, ...]


def _fds(p: psutil.Process) -> tuple[tuple[int, bytes], ...]:
    if LINUX:
        base = f"/proc/{p.pid}/fd"
        out = []
        try:
            names = sorted(os.listdir(base), key=int)
        except OSError:
            return ()
        for fd in names:
            try:
                out.append((int(fd), os.readlink(f"{base}/{fd}".encode())))
            except OSError:
                continue
        return tuple(out)
    try:
        return tuple((f.fd, os.fsencode(f.path)) for f in p.open_files())
    except (psutil.Error, OSError):
        return ()


def _sockets(p: psutil.Process) -> tuple[dict[str, Any], ...]:
    try:
        conns = p.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return ()
    out = []
    for c in conns:
        proto = ("tcp" if c.type == 1 else "udp") + ("6" if c.family == 10 else "")
        out.append(
            {
                "fd": c.fd,
                "proto": proto,
                "laddr": f"{c.laddr.ip}:{c.laddr.port}" if c.laddr else None,
                "raddr": f"{c.raddr.ip}:{c.raddr.port}" if c.raddr else None,
                "status": c.status,
            }
        )
    return tuple(out)


def _one(p: psutil.Process, depth: int, now: datetime) -> ProcSnapshot | None:
    info = proc_info(p.pid)
    try:
        with p.oneshot():
            created = p.create_time()
            status = p.status()
            user = p.username()
    except (psutil.Error, OSError):
        return None
    if info is None:
        return None
    red = redact_argv(list(info.cmdline))
    start = datetime.fromtimestamp(created, tz=timezone.utc)
    return ProcSnapshot(
        pid=p.pid,
        ppid=info.ppid,
        depth=depth,
        user=user,
        uid=info.uid,
        start=start,
        start_ticks=info.start,
        elapsed_s=max(0.0, (now - start).total_seconds()),
        status=status,
        exe=info.exe,
        cmdline=red.argv,
        redactions=tuple(sorted(set(red.rules))),
        cwd=info.cwd,
        credential_env=info.env_names,
        files=_fds(p),
        sockets=_sockets(p),
    )


def take(pid: int) -> Snapshot:
    """The family of `pid` (itself and every descendant), parents before children."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        raise InputError(f"no process with pid {pid}") from None
    except psutil.Error as exc:
        raise InputError(f"pid {pid}: {exc}") from None
    now = datetime.now(timezone.utc)
    procs: list[ProcSnapshot] = []
    todo: list[tuple[psutil.Process, int]] = [(root, 0)]
    while todo:
        p, depth = todo.pop()
        snap = _one(p, depth, now)
        if snap is None:
            continue
        procs.append(snap)
        try:
            kids = sorted(p.children(), key=lambda k: k.pid, reverse=True)
        except psutil.Error:
            kids = []
        todo.extend((k, depth + 1) for k in kids)
    if not procs:
        raise InputError(f"pid {pid} exited before it could be read")
    return Snapshot(pid, now, current_boot_id(), tuple(procs))


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def default_path(snap: Snapshot, fmt: str) -> Path:
    stamp = snap.time.strftime("%Y%m%dT%H%M%S%fZ")
    ext = "json" if fmt == "json" else "txt"
    return default_state_dir() / "snapshots" / f"snapshot-{snap.root}-{stamp}.{ext}"


def _proc_json(p: ProcSnapshot) -> dict[str, Any]:
    out: dict[str, Any] = {
        "pid": p.pid,
        "ppid": p.ppid,
        "depth": p.depth,
        "user": p.user,
        "uid": p.uid,
        "start": _iso(p.start),
        "start_ticks": p.start_ticks,
        "elapsed_s": round(p.elapsed_s, 3),
        "status": p.status,
        "exe": json_text(p.exe),
        "cmdline": [json_text(a) for a in p.cmdline],
        "redacted": list(p.redactions),
        "cwd": json_text(p.cwd),
        "credential_env": list(p.credential_env),
        "files": [{"fd": fd, "target": json_text(t)} for fd, t in p.files],
        "sockets": list(p.sockets),
    }
    out.update(b64_fields({"exe": p.exe, "cwd": p.cwd, "cmdline": p.cmdline}))
    return out


def render_json(snap: Snapshot) -> str:
    doc = {
        "schema": SNAPSHOT_SCHEMA_ID,
        "tool": {"name": "mcpshim", "version": __version__},
        "root": snap.root,
        "time": _iso(snap.time),
        "boot_id": snap.boot_id,
        "processes": [_proc_json(p) for p in snap.processes],
    }
    return dumps(doc, indent=2) + "\n"


def render_text(snap: Snapshot) -> str:
    lines = [
        f"snapshot of pid {snap.root} at {_iso(snap.time)} (boot {snap.boot_id or '?'}): "
        f"{len(snap.processes)} process(es)"
    ]
    for p in snap.processes:
        pad = "  " * p.depth
        lines.append(
            f"{pad}{p.pid} ppid={p.ppid} user={escape(p.user)} status={escape(p.status)} "
            f"start={_iso(p.start)} elapsed={p.elapsed_s:.1f}s"
        )
        lines.append(f"{pad}  exe: {escape(p.exe)}")
        lines.append(f"{pad}  cmd: {quote_argv(p.cmdline)}")
        lines.append(f"{pad}  cwd: {escape(p.cwd)}")
        if p.credential_env:
            lines.append(f"{pad}  credential env (names): {', '.join(p.credential_env)}")
        for fd, target in p.files:
            lines.append(f"{pad}  fd {fd}: {escape(target)}")
        for s in p.sockets:
            r = f" -> {s['raddr']}" if s["raddr"] else ""
            lines.append(f"{pad}  socket fd {s['fd']}: {s['proto']} {s['laddr']}{r} {s['status']}")
    return "\n".join(lines) + "\n"
