"""Trace records as tree images, and the merge of a shim record with the traced exec it is.

Images. Each `trace-exec` record becomes an `Image` whose `source` says what it is, so the
per-image review rules stay pure over the image: `trace` (an exec no shim took part in),
`trace-shim` (either half of an exec that went through a shim: the shim script, then the
target it exec'd), `trace-search/ERRNO` (a failed step of a PATH search that went on to the
next directory), `trace-failed/ERRNO` (an exec that failed for good), `trace-blocked/ERRNO`
(an attempt a contained session's ruleset refused: `run --contain`). An image's `target` is
the path passed to execve (for `/proc/self/exe` and the like, the file it named in the
process that called execve: the record's `resolved`) and `argv0` the argv[0] string; a
failed attempt ran nothing, so its `target` is empty and `argv0` holds the path it tried.
A `trace-gap` record (a family member no record explains) becomes a `trace-gap` image.

Merge rule. A shim's exec is recorded three times: the tracer sees the caller's execve of
the shim script (filename in the shim dir), the shim writes its ExecRecord, and the tracer
sees the shim's execve of its target. They are one exec when they have the same boot id and
pid, the trace records come in that pid's order (script, then target), the target exec's
filename equals the shim record's target, and the starts agree within one clock tick (a
trace start derived from a fork time can be one tick off; the tracer snaps it to the shim's
exact start when it can, so normally they are equal and the linker already puts all three
in one node). `pair_shim_records` returns those triples; `collapse` drops, from one node's
images, the trace halves that a shim image of the same pid already shows.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mcpshim.family.images import Image, bytes_field, parse_time
from mcpshim.log.execlog import EventRecord, ExecRecord, Record

__all__ = [
    "ShimExec",
    "argv_field",
    "fork_image",
    "gap_image",
    "pair_shim_records",
    "trace_image",
]


def argv_field(d: Any, name: str) -> list[bytes]:
    """An argv-like list field of a JSON event, exact from its `NAME_b64` twin."""
    raw = d.get(name)
    argv = (
        [a.encode("utf-8", "surrogateescape") for a in raw if isinstance(a, str)]
        if (isinstance(raw, list))
        else []
    )
    b64 = d.get(f"{name}_b64")
    if isinstance(b64, dict):
        for k, v in b64.items():
            if str(k).isdigit() and int(k) < len(argv) and isinstance(v, str):
                argv[int(k)] = base64.b64decode(v)
    return argv


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def trace_source(d: Any) -> str:
    result = _str(d.get("result")) or "?"
    if result != "ok":
        if d.get("blocked"):
            return f"trace-blocked/{result}"
        return f"trace-{'search' if d.get('search') else 'failed'}/{result}"
    return "trace-shim" if d.get("shim_script") or d.get("via_shim") else "trace"


def trace_image(rec: EventRecord) -> Image | None:
    d = rec.data
    pid = _int(d.get("pid"))
    if pid is None or d.get("shim_helper") is True:  # (the shim library's own helper)
        return None
    filename = bytes_field(d, "filename")
    if d.get("resolved"):  # an exe link (/proc/self/exe): the file it named in that process
        filename = bytes_field(d, "resolved")
    argv = argv_field(d, "argv")
    red = d.get("argv_redacted")
    source = trace_source(d)
    ok = source in ("trace", "trace-shim")
    return Image(
        source,
        rec.where,
        parse_time(d.get("time")),
        _str(d.get("boot_id")),
        pid,
        _int(d.get("ppid")),
        _int(d.get("start")),
        _int(d.get("parent_start")),
        bytes_field(d, "cwd"),
        os.path.basename(filename).decode("utf-8", "replace"),
        filename if ok else b"",  # nothing ran: rules about the executable do not apply
        (argv[0] if argv else filename) if ok else filename,
        tuple(argv[1:]),
        _str(d.get("session")),
        tuple(r for r in red if isinstance(r, str)) if isinstance(red, list) else (),
        shim_hop=d.get("shim_script") is True,
    )


def fork_image(rec: EventRecord, seen: Image | None = None) -> Image | None:
    """A process that never exec'd (a `trace-fork` record: Chromium's zygote children, a
    Python worker): a process of the tree, no exec (`entry` false). It runs its parent's
    program; what the sampler saw of it while it lived (`seen`: the title a renderer gives
    itself) is what is known of its command line."""
    d = rec.data
    pid = _int(d.get("pid"))
    if pid is None or d.get("shim_helper") is True:
        return None
    return Image(
        "trace-fork",
        rec.where,
        parse_time(d.get("time")),
        _str(d.get("boot_id")),
        pid,
        _int(d.get("ppid")),
        _int(d.get("start")),
        _int(d.get("parent_start")),
        bytes_field(d, "cwd"),
        seen.command if seen is not None else "",
        seen.target if seen is not None else b"",
        seen.argv0 if seen is not None else b"",
        seen.args if seen is not None else (),
        _str(d.get("session")),
        entry=False,
    )


def gap_image(rec: EventRecord) -> Image | None:
    d = rec.data
    pid = _int(d.get("pid"))
    if pid is None:
        return None
    argv = argv_field(d, "cmdline")
    exe = bytes_field(d, "exe")
    return Image(
        "trace-gap",
        rec.where,
        parse_time(d.get("time")),
        _str(d.get("boot_id")),
        pid,
        _int(d.get("ppid")),
        _int(d.get("start")),
        None,
        b"",
        os.path.basename(exe or (argv[0] if argv else b"")).decode("utf-8", "replace"),
        exe,
        argv[0] if argv else exe,
        tuple(argv[1:]),
        _str(d.get("session")),
    )


# ---- merging -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShimExec:
    """One exec through a shim: its record, and the traced execs of the script and target."""

    shim: ExecRecord
    script: EventRecord | None
    target: EventRecord | None


def _close(a: int | None, b: int | None) -> bool:
    return a is None or b is None or abs(a - b) <= 1


def pair_shim_records(records: Iterable[Record]) -> list[ShimExec]:
    """Pair every shim record with the trace records of the same exec (see the merge rule)."""
    by_pid: dict[tuple[str, int], list[EventRecord]] = {}
    shim_recs: list[ExecRecord] = []
    for r in records:
        if isinstance(r, ExecRecord):
            shim_recs.append(r)
        elif r.kind == "trace-exec" and r.data.get("result") == "ok":
            pid = _int(r.data.get("pid"))
            if pid is not None:
                by_pid.setdefault((_str(r.data.get("boot_id")), pid), []).append(r)
    used: set[int] = set()
    out: list[ShimExec] = []
    for s in shim_recs:
        seq = by_pid.get((s.boot_id, s.pid), [])
        target: EventRecord | None = None
        script: EventRecord | None = None
        for i, t in enumerate(seq):
            if id(t) in used or not _close(_int(t.data.get("start")), s.start):
                continue
            if bytes_field(t.data, "filename") == s.target:
                prev = seq[i - 1] if i > 0 else None
                if (
                    prev is not None
                    and id(prev) not in used
                    and bytes_field(prev.data, "filename") == s.invoked_as
                ):
                    script = prev
                target = t
                break
        for found in (script, target):
            if found is not None:
                used.add(id(found))
        out.append(ShimExec(s, script, target))
    return out
