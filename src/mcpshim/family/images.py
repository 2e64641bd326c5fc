"""Every record source as an `Image`: one program a process ran, as the log knows it.

Shim exec records carry it directly; "observed" events sampled by the supervisor and a
shim's parent evidence are converted here, trace records in trace_merge; the process model
(family.model) decides which of them is an exec, and the tree links them into processes.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from mcpshim.log.execlog import EventRecord, ExecRecord, Record
from mcpshim.log.ledger import SHELLS
from mcpshim.log.shimhelper import is_shim_helper

__all__ = [
    "Image",
    "bytes_field",
    "image_of",
    "invoked_name",
    "parent_image",
    "parse_time",
]


@dataclass(frozen=True, slots=True)
class Image:
    """One program image a process ran, whatever recorded it."""

    source: str  # "shim" | "observed" | later sources
    where: str
    time: datetime | None
    boot_id: str
    pid: int
    ppid: int | None
    start: int | None
    parent_start: int | None
    cwd: bytes
    command: str  # the shim's name, or the executable's base name
    target: bytes  # the executable that ran
    argv0: bytes  # shim: the path the caller exec'd; observed: cmdline[0]
    args: tuple[bytes, ...]
    session: str
    redactions: tuple[str, ...] = ()
    uid: int | None = None
    #: why the cwd is unknown (then `cwd` is b""); "" when it is known
    cwd_unknown: str = ""
    #: the command line of the shell that started this process, when a shim kept it (the
    #: shell's first shimmed child does: parent evidence), its arguments joined by blanks
    parent_cmdline: bytes = b""
    path: bytes = b""  # the PATH the process received (shim records keep it)
    shim_hop: bool = False  # the tracer's record of a shim script's own exec (not a program)
    #: an exec of its process (family.model); False for what ran nothing (a failed exec, a
    #: PATH search's step another record's exec shows) or repeats an exec (a tracer's gap)
    entry: bool = True
    #: the steps a PATH search tried before this exec, (path tried, errno), in order
    attempts: tuple[tuple[bytes, str], ...] = ()
    #: that shell's argv exactly (scrubbed), when the shim kept it whole (older shims did not)
    parent_argv: tuple[bytes, ...] = ()


def _from_exec(rec: ExecRecord) -> Image:
    return Image(
        "shim",
        rec.where,
        rec.time,
        rec.boot_id,
        rec.pid,
        rec.ppid,
        rec.start,
        rec.parent_start,
        rec.cwd,
        rec.shim,
        rec.target,
        rec.invoked_as,
        rec.args,
        rec.session,
        rec.redactions,
        cwd_unknown=rec.cwd_unknown,
        parent_cmdline=rec.parent_cmdline,
        path=rec.path,
        parent_argv=rec.parent_argv,
    )


def bytes_field(data: Any, name: str) -> bytes:
    """A byte field of a JSON event: exact from its `NAME_b64` twin when there is one."""
    b64 = data.get(f"{name}_b64")
    if isinstance(b64, str):
        return base64.b64decode(b64)
    value = data.get(name)
    return value.encode("utf-8", "surrogateescape") if isinstance(value, str) else b""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def invoked_name(argv0: bytes, fallback: str) -> str:
    """The name a sampled process was invoked as (argv[0]: `sh` for /bin/sh, which /proc
    resolves to dash), as the shim and the tracer name it; a title the process set itself
    (spaces, parentheses) is not a program's name, so `fallback` (its file's) is kept."""
    if argv0.startswith(b"/proc/"):  # /proc/self/exe: the file it ran, not "exe"
        return fallback
    head = os.path.basename(argv0).lstrip(b"-")
    if head and head.replace(b".", b"").replace(b"_", b"").replace(b"-", b"").isalnum():
        return head.decode("utf-8", "replace")
    return fallback


def _from_observed(rec: EventRecord) -> Image | None:
    """A process the supervisor saw (issue 5): cmdline items that were not UTF-8 are exact
    in cmdline_b64 {index: base64}."""
    d = rec.data
    pid = _int(d.get("pid"))
    if pid is None:
        return None
    raw = d.get("cmdline")
    cmdline = [c for c in raw if isinstance(c, str)] if isinstance(raw, list) else []
    argv = [c.encode("utf-8", "surrogateescape") for c in cmdline]
    b64 = d.get("cmdline_b64")
    if isinstance(b64, dict):
        for k, v in b64.items():
            if str(k).isdigit() and int(k) < len(argv) and isinstance(v, str):
                argv[int(k)] = base64.b64decode(v)
    if is_shim_helper(argv):  # the shim library's own helper, caught alive by the sampler
        return None
    exe = bytes_field(d, "exe")
    name = os.path.basename(exe or (argv[0] if argv else b"")).decode("utf-8", "replace")
    session = d.get("session")
    return Image(
        "observed",
        rec.where,
        parse_time(d.get("time")),
        str(d.get("boot_id") or ""),
        pid,
        _int(d.get("ppid")),
        _int(d.get("start")),
        _int(d.get("parent_start")),
        bytes_field(d, "cwd"),
        name,
        exe,
        argv[0] if argv else exe,
        tuple(argv[1:]),
        session if isinstance(session, str) else "",
        (),
        _int(d.get("uid")),
    )


def parent_image(rec: ExecRecord) -> Image:
    """The shell a shim record's parent evidence names, as an exec no other record shows:
    its argv exactly where the record keeps it (`parent_argv`), else the line an older
    shim kept without its NUL separators (argv[0] found by the shell's name)."""
    argv: tuple[bytes, ...] = getattr(rec, "parent_argv", ())
    if argv:
        name = os.path.basename(argv[0]).lstrip(b"-").decode("utf-8", "replace")
        return Image("parent", rec.where, rec.time, rec.boot_id, rec.ppid or 0, None,
                     rec.parent_start, None, b"", name, b"", argv[0], argv[1:],
                     rec.session)  # fmt: skip
    text = rec.parent_cmdline
    word = text.split(b" ", 1)[0]
    base = os.path.basename(word)
    name = max((n for n in SHELLS if base.startswith(n.encode())), key=len, default="")
    argv0 = word[: len(word) - len(base) + len(name)] if name else word
    rest = text[len(argv0) :]
    if rest.startswith(b"-c") and len(rest) > 2 and rest[2:3] != b" ":
        return Image("parent", rec.where, rec.time, rec.boot_id, rec.ppid or 0, None,
                     rec.parent_start, None, b"", name or os.path.basename(argv0).decode(
                         "utf-8", "replace"), b"", argv0, (b"-c", rest[2:]),
                     rec.session)  # fmt: skip
    return Image("parent", rec.where, rec.time, rec.boot_id, rec.ppid or 0, None,
                 rec.parent_start, None, b"", name or os.path.basename(argv0).decode(
                     "utf-8", "replace"), b"", argv0, (rest,) if rest else (),
                 rec.session)  # fmt: skip


_LAST: list[tuple[Record | None, Image | None]] = [(None, None)]


def image_of(rec: Record) -> Image | None:
    """The record's image. The last one is kept: a record read once is often converted
    twice in a row (attribution's collector sees it, then review's scan)."""
    last = _LAST[0]  # one read and one write of the pair: threads never mix two records
    if last[0] is rec:
        return last[1]
    if isinstance(rec, ExecRecord):
        img: Image | None = _from_exec(rec)
    else:
        img = _from_observed(rec) if rec.kind == "observed" else None
    _LAST[0] = (rec, img)
    return img
