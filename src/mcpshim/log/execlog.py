"""The exec log: record codec, streaming reader, Python-side writer and rotation.

Framing. A NUL byte is never part of an argument, a path or an environment value, so only a
writer's format string can put one in the log, and every NUL is followed by a tag byte:
``\\0R`` starts a record, ``\\0=`` starts a field, ``\\0\\n`` ends the record, ``\\0P`` starts
a pointer to a record kept in a spill file. No argument content can therefore open, close or
split a record, and a record cut short (a crash, ENOSPC, RLIMIT_FSIZE) is recognised because
the next ``\\0R`` arrives before its ``\\0\\n``.

Shims write ``exec`` records (positional fields, raw bytes). Python writers append other kinds
as one JSON field; JSON never holds a raw NUL.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

from mcpshim.base.fdio import open_regular
from mcpshim.base.frozen import positional
from mcpshim.errors import InputError
from mcpshim.log.boot import (
    MAX_SECONDS,
    Anchors,
    clock_seconds,
    current_boot_id,
    now_anchor,
)
from mcpshim.log.events import event_data
from mcpshim.log.execfields import EXEC_HEAD, TAIL_AT, Tail, Tails, decode_tail
from mcpshim.log.execfields import int_field as _int
from mcpshim.log.framing import LogProblem, Readable, bodies, body_of, encode_record, pieces
from mcpshim.paths import Locations

__all__ = [
    "CLK_TCK",
    "Anchors",
    "EventRecord",
    "ExecRecord",
    "LogProblem",
    "Record",
    "SessionSeen",
    "Tail",
    "current_boot_id",
    "decode_piece",
    "encode_record",
    "exec_record",
    "iter_records",
    "missing_session",
    "now_anchor",
    "pointer_name",
    "read_stream",
    "segments",
    "session_of",
    "spill_name",
    "spill_names",
]

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_EXEC_FIELDS = 16  # positional fields before the arguments
#: a spill file name as the shims write it (boot.pid.start.uptime.n): never a path, never hidden
_SPILL_NAME = re.compile(rb"[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}")


@dataclass(frozen=True, slots=True)
class ExecRecord:
    """One exec seen by a shim. Byte fields are exactly what the process had."""

    btime: float | None
    uptime: float | None
    boot_id: str
    pid: int
    ppid: int | None
    start: int | None
    parent_start: int | None
    cwd: bytes
    shim: str
    target: bytes
    invoked_as: bytes
    session: str
    path: bytes
    redactions: tuple[str, ...]
    args: tuple[bytes, ...]
    where: str = ""
    #: a shell parent's command line (kept by its first shimmed child): its arguments joined
    #: with blanks, as `ps` shows them (records of older shims: NUL separators lost)
    parent_cmdline: bytes = b""
    kind: str = "exec"
    #: why the cwd is unknown (then `cwd` is b""); "" when it is known
    cwd_unknown: str = ""
    #: the shell parent's argv exactly, as its shimmed child kept it (scrubbed); () when the
    #: record has none, or one of an older shim (only parent_cmdline then)
    parent_argv: tuple[bytes, ...] = ()

    @property
    def time(self) -> datetime | None:
        if self.btime is None or self.uptime is None:
            return None
        return _utc(self.btime + self.uptime)

    @property
    def start_time(self) -> datetime | None:
        if self.btime is None or self.start is None:
            return None
        return _utc(self.btime + self.start / CLK_TCK)

    @property
    def identity(self) -> tuple[str, int, int | None]:
        return (self.boot_id, self.pid, self.start)

    @property
    def parent_identity(self) -> tuple[str, int | None, int | None]:
        return (self.boot_id, self.ppid, self.parent_start)


@dataclass(frozen=True, slots=True)
class EventRecord:
    """A record written by mcpshim itself (session, observation, tool call...)."""

    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)
    where: str = ""


Record = ExecRecord | EventRecord


def session_of(rec: Record) -> str | None:
    """The session a record belongs to: an exec's MCPSHIM_SESSION, an event's own field."""
    if isinstance(rec, ExecRecord):
        return rec.session
    sid = rec.data.get("session")
    return sid if isinstance(sid, str) else None


class SessionSeen:
    """Passes records through and notes whether any belongs to `session`: a session id
    that matches nothing is a typo to report, not an empty, clean session."""

    def __init__(self, records: Iterable[Record], session: str | None) -> None:
        self._records, self.session = records, session
        self.seen = session is None

    def __iter__(self) -> Iterator[Record]:
        for rec in self._records:
            if not self.seen and session_of(rec) == self.session:
                self.seen = True
            yield rec

    def check(self, loc: Locations) -> None:
        if not self.seen and self.session is not None:
            raise missing_session(loc, self.session)


def missing_session(loc: Locations, session: str) -> InputError:
    return InputError(
        f"no records of session {session!r} in {loc.log_dir} "
        "(`mcpshim log` shows each record's session)"
    )


# ---- decoding ----------------------------------------------------------------------------


def _utc(seconds: float) -> datetime | None:
    if not 0 <= seconds < MAX_SECONDS:
        return None
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


_NO_ANCHORS = Anchors(None)
_TAILS_KEPT = 4096  # distinct tails a reader keeps decoded (then it starts again)
_make_exec = positional(ExecRecord)


def exec_record(
    btime: float | None,
    uptime: float | None,
    boot_id: str,
    pid: int,
    ppid: int | None,
    start: int | None,
    parent_start: int | None,
    t: Tail,
    where: str,
) -> ExecRecord:
    """The record of the fields before the cwd, decoded, and its tail."""
    return _make_exec(btime, uptime, boot_id, pid, ppid, start, parent_start, t.cwd, t.shim,
                      t.target, t.invoked_as, t.session, t.path, t.redactions, t.args, where,
                      t.parent_cmdline, "exec", t.cwd_unknown, t.parent_argv)  # fmt: skip


def _exec(head: Sequence[bytes], tail: Tail | str, where: str, anchors: Anchors) -> ExecRecord:
    """The record of its fields before the cwd (boot time, uptime, boot id, pid, ppid,
    start, parent start) and its tail decoded (`decode_tail`); ValueError for a bad one."""
    if isinstance(tail, str):
        raise ValueError(tail)
    pid, ppid, start, pstart = map(_int, head[3:7])
    if pid is None:
        raise ValueError("exec record without a pid")
    boot_id = head[2].decode("ascii", "replace")
    btime = clock_seconds(head[0]) if head[0] else anchors.get(boot_id)
    return exec_record(btime, clock_seconds(head[1]), boot_id, pid, ppid, start, pstart, tail,
                       where)  # fmt: skip


def _decode(fields: list[bytes], where: str, anchors: Anchors = _NO_ANCHORS) -> Record:
    if len(fields) < 2 or fields[0] != b"1":
        raise ValueError("unknown record version")
    if fields[1] != b"exec":
        kind = fields[1].decode("ascii", "replace")
        if len(fields) != 3:
            raise ValueError(f"{kind} record with {len(fields)} fields")
        return EventRecord(kind, event_data(fields[2]), where)
    return _exec(fields[2:9], decode_tail(fields[9:]), where, anchors)


def spill_name(fields: list[bytes]) -> str | None:
    """The file a spill pointer's fields name, or None when they are not a valid pointer.

    The one check of a pointer, used by the reader and by rotation (which deletes what a
    pointer names): a plain name inside spill/, as the shims write it, never a path."""
    if len(fields) != 2 or fields[0] != b"1" or not _SPILL_NAME.fullmatch(fields[1]):
        return None
    return fields[1].decode("ascii")


def _fields(body: bytes) -> list[bytes] | None:
    """The fields of a record or pointer body (`\\0R...`/`\\0P...`, no end marker)."""
    parts = body[2:].split(b"\0=")
    # body holds one NUL per separator plus the tag's: any other NUL is inside a field.
    if parts[0] != b"" or body.count(b"\0") != len(parts):
        return None
    return parts[1:]


def _parse_one(
    body: bytes, where: str, spill_dir: Path | None, anchors: Anchors
) -> tuple[Record | None, str]:
    """Decode `\\0R...` or `\\0P...` (without the end marker); returns (record, problem)."""
    tag = body[1:2]
    fields = _fields(body)
    if fields is None:
        return None, "malformed record"
    if tag == b"P":
        if spill_dir is None or len(fields) != 2 or fields[0] != b"1":
            return None, "malformed spill pointer"
        name = spill_name(fields)
        if name is None:
            return None, f"spill pointer with a bad name {fields[1].decode('ascii', 'replace')!r}"
        try:
            with open_regular(spill_dir / name) as fh:
                data = fh.read()
        except OSError as exc:
            return None, f"spill file {name} unreadable: {exc.strerror}"
        except InputError:
            return None, f"spill file {name} is not a regular file"
        if not data.startswith(b"\0R") or not data.endswith(b"\0\n"):
            return None, f"spill file {name} is incomplete"
        return _parse_one(data[:-2], f"{where} -> spill/{name}", None, anchors)
    if tag != b"R":
        return None, "unknown record tag"
    try:
        return _decode(fields, where, anchors), ""
    except (ValueError, UnicodeDecodeError) as exc:
        return None, str(exc)


def read_stream(
    stream: Readable,
    name: str,
    spill_dir: Path | None,
    problems: list[LogProblem],
    anchors: Anchors = _NO_ANCHORS,
    base: int = 0,
) -> Iterator[Record]:
    """Stream records from one log file (read from offset `base` on); memory holds one
    chunk plus the largest record, and a bounded table of tails."""
    tails = Tails(_TAILS_KEPT)
    for pos, piece in pieces(stream, name, problems, base):
        rec = decode_piece(pos, piece, name, spill_dir, problems, anchors, tails)
        if rec is not None:
            yield rec


def decode_piece(
    pos: int,
    piece: bytes,
    name: str,
    spill_dir: Path | None,
    problems: list[LogProblem],
    anchors: Anchors = _NO_ANCHORS,
    tails: Tails | None = None,
) -> Record | None:
    """The record one framed piece holds (framing.pieces), or None with the problem said.

    The common piece is one whole record, `\\0R` then fields and no other NUL: an exec
    record's tail is looked up in `tails` (each decoded once), any other record split
    once and decoded here; anything else (a pointer, a torn record, stray bytes) takes the
    general path (`framing.body_of`, `_parse_one`), which says what is wrong."""
    if tails is not None and piece.startswith(EXEC_HEAD):
        parts = piece.split(b"\0=", TAIL_AT)
        if len(parts) == TAIL_AT + 1:
            tid = tails.index(parts[TAIL_AT])
            if tid >= 0 and piece.count(b"\0") == tails.nuls[tid]:
                where = f"{name}@{pos}"
                try:
                    return _exec(parts[3:TAIL_AT], tails.tails[tid], where, anchors)
                except ValueError as exc:
                    problems.append(LogProblem(where, str(exc)))
                    return None
    if piece.startswith(b"\0R"):
        parts = piece.split(b"\0=")
        if parts[0] == b"\0R" and piece.count(b"\0") == len(parts):
            where = f"{name}@{pos}"
            try:
                return _decode(parts[1:], where, anchors)
            except (ValueError, UnicodeDecodeError) as exc:
                problems.append(LogProblem(where, str(exc)))
                return None
    at, body = body_of(pos, piece, name, problems)
    if at < 0:
        return None
    rec, problem = _parse_one(body, f"{name}@{at}", spill_dir, anchors)
    if rec is None:
        problems.append(LogProblem(f"{name}@{at}", problem))
    return rec


def pointer_name(body: bytes) -> str | None:
    """The spill file a body names when it is a valid pointer (see spill_name), else None."""
    fields = _fields(body) if body[1:2] == b"P" else None
    return spill_name(fields) if fields is not None else None


def spill_names(stream: BinaryIO) -> Iterator[str]:
    """The spill files the valid pointers of one log file name (what rotation may delete)."""
    for _, body in bodies(stream, "", []):  # what is not a whole record: skipped
        if (name := pointer_name(body)) is not None:
            yield name


def segments(loc: Locations) -> list[Path]:
    """Rotated segments oldest first, then the live log."""
    rotated = sorted(
        (p for p in loc.log_dir.glob("exec.log.[0-9]*") if p.name[9:].isdigit()),
        key=lambda p: int(p.name[9:]),
    )
    live = [loc.log_file] if loc.log_file.exists() else []
    return rotated + live


def iter_records(loc: Locations, problems: list[LogProblem]) -> Iterator[Record]:
    """Every record of every segment, in log order. A missing or unreadable log is an error
    at the call, not at the first record: a command says so before it prints anything.
    All segments are opened first (without blocking, regular files only: a FIFO would
    block the read for ever): a rotation while we read renames, never loses, a file."""
    if not loc.log_dir.is_dir():
        raise InputError(f"no exec log at {loc.log_dir} (run `mcpshim install` first)")
    files: list[tuple[str, BinaryIO]] = []
    try:
        for p in segments(loc):
            with contextlib.suppress(FileNotFoundError):
                files.append((p.name, open_regular(p)))
    except BaseException:
        for _, fh in files:
            fh.close()
        raise
    return _records(loc, files, problems)


def _records(
    loc: Locations, files: list[tuple[str, BinaryIO]], problems: list[LogProblem]
) -> Iterator[Record]:
    try:
        anchors = Anchors(loc.boot_dir)
        for name, fh in files:
            yield from read_stream(fh, name, loc.spill_dir, problems, anchors)
    finally:
        for _, fh in files:
            fh.close()
