"""The tracer's `trace-file` records as typed values, for the readers that put file facts on
processes and tool calls: one `FileRecord` per record, keyed by the process identity every
other record uses (boot id, pid, start).

A record says what the kernel answered (docs/log-format.md), never a file's content: a
credential file opened (`credential`: the table's label), a place that runs later written
(`persistence`), a file the session wrote then run (`change` run, with `written`: when,
by which process), a program run after its parent read the project's configuration
(`change` run, with `configured`: the files, when, which process), or a metadata change
outside a contained session's write directories (`outside`). A record a writer could not
have made is not a FileRecord: `file_record` returns None, so a reader skips it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mcpshim.log.eventfields import as_int, as_str, as_time, text_bytes
from mcpshim.log.execlog import EventRecord, Record

__all__ = ["Configured", "FileRecord", "Written", "file_record"]

Identity = tuple[str, int, int | None]  # boot id, pid, start ticks


@dataclass(frozen=True)
class Written:
    """The write a file that was run came from."""

    time: datetime
    pid: int
    start: int | None
    call: str
    path: bytes | None  # the name it was written under, when not the one run


@dataclass(frozen=True)
class Configured:
    """The project's configuration files a program's parent read before it ran."""

    time: datetime  # the last of the reads
    pid: int
    start: int | None
    paths: tuple[bytes, ...]


@dataclass(frozen=True)
class FileRecord:
    boot_id: str
    pid: int
    start: int | None
    time: datetime
    call: str  # the syscall
    change: str  # open, write, create, truncate, append, rename, link, run, mode, owner, times
    path: bytes | None  # redacted where a credential shape matched
    result: str  # ok or the errno
    access: str | None = None  # read, write, read-write (an open)
    credential: str | None = None  # the table's label
    private_key: bool = False
    persistence: str | None = None  # the table's label
    blocked: str | None = None  # a contained session's ruleset refused it: why
    outside: str | None = None  # outside the --contain-write directories: why
    detail: str = ""  # a mode change: the mode as strace printed it
    interpreter: str | None = None  # run: the interpreter that was given the file
    written: Written | None = None  # run: where the file came from
    configured: Configured | None = None  # run: the configuration its parent read first
    tid: int | None = None
    session: str | None = None
    where: str = ""

    @property
    def identity(self) -> Identity:
        return (self.boot_id, self.pid, self.start)

    @property
    def ok(self) -> bool:
        return self.result == "ok"

    @property
    def shown(self) -> str:
        """The path as text (escaped by whoever renders it)."""
        return self.path.decode("utf-8", "surrogateescape") if self.path is not None else "?"


def _written(v: Any) -> Written | None:
    if not isinstance(v, dict):
        return None
    t, pid = as_time(v.get("time")), as_int(v.get("pid"))
    if t is None or pid is None:
        return None
    return Written(t, pid, as_int(v.get("start")), str(v.get("call") or "?"), text_bytes(v, "path"))


def _configured(v: Any) -> Configured | None:
    if not isinstance(v, dict) or not isinstance(v.get("paths"), list):
        return None
    t, pid = as_time(v.get("time")), as_int(v.get("pid"))
    got_b64 = v.get("paths_b64")
    exact: dict[str, Any] = got_b64 if isinstance(got_b64, dict) else {}
    paths = []
    for i, p in enumerate(v["paths"]):
        got = text_bytes({"p": p, "p_b64": exact.get(str(i))}, "p")
        if got is not None:
            paths.append(got)
    if t is None or pid is None or not paths:
        return None
    return Configured(t, pid, as_int(v.get("start")), tuple(paths))


def file_record(rec: Record) -> FileRecord | None:
    """The record as a FileRecord, or None: not a trace-file record, or not one mcpshim
    writes."""
    if not isinstance(rec, EventRecord) or rec.kind != "trace-file":
        return None
    d = rec.data
    pid, t, boot = as_int(d.get("pid")), as_time(d.get("time")), d.get("boot_id")
    call, change, result = d.get("call"), d.get("change"), d.get("result")
    if pid is None or t is None or not isinstance(boot, str):
        return None
    if not (isinstance(call, str) and isinstance(change, str) and isinstance(result, str)):
        return None
    return FileRecord(
        boot_id=boot, pid=pid, start=as_int(d.get("start")), time=t, call=call, change=change,
        path=text_bytes(d, "path"), result=result, access=as_str(d.get("access")),
        credential=as_str(d.get("credential")), private_key=d.get("private_key") is True,
        persistence=as_str(d.get("persistence")), blocked=as_str(d.get("blocked")),
        outside=as_str(d.get("outside")), detail=str(d.get("detail") or ""),
        interpreter=as_str(d.get("interpreter")), written=_written(d.get("written")),
        configured=_configured(d.get("configured")),
        tid=as_int(d.get("tid")), session=as_str(d.get("session")), where=rec.where,
    )  # fmt: skip
