"""Exec records as rows: what links a process decoded per record, the rest once per tail.

A log repeats its command lines: the fields from the cwd on (cwd, command, target, the
path the caller exec'd, session, PATH, redactions, the shell's line, argv) are the same
bytes for every run of one command in one place and session, a few thousand distinct
tails in a million records. `ExecRows.read` cuts a common exec record into its ten leading
fields and that tail, decodes the integers and clocks, and decodes each distinct tail
once (`Tail`). Every other piece (an event, a spill pointer, a torn or malformed record,
a pid of 19 digits...) goes through `execlog.decode_piece`, the reader's own decoding, so
the records read and the problems said are the same as `execlog.read_stream`'s.

`ExecRows.record(row)` gives the very `ExecRecord` the reader would have made, for the
few a command keeps (evidence, a family's first image).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

from mcpshim.base.fdio import open_regular
from mcpshim.errors import InputError
from mcpshim.log import execlog
from mcpshim.log.boot import Anchors, clock_seconds
from mcpshim.log.execlog import ExecRecord, LogProblem, Record
from mcpshim.log.framing import Readable, pieces
from mcpshim.log.parentfield import parent_fields
from mcpshim.paths import Locations

__all__ = ["ExecRows", "Row", "Tail"]

_HEAD = b"\0R\0=1\0=exec\0="
_HEAD_NULS = 11  # the record's tag and the ten separators before the tail


class Tail(NamedTuple):
    """The fields of an exec record from its cwd on, decoded as `execlog._decode` does."""

    cwd: bytes
    cwd_unknown: str
    shim: str
    target: bytes
    invoked_as: bytes
    session: str
    path: bytes
    redactions: tuple[str, ...]
    parent_cmdline: bytes
    args: tuple[bytes, ...]
    parent_argv: tuple[bytes, ...] = ()


#: (segment index, offset, tail index, boot id, pid, ppid, start, parent start, btime,
#: uptime): a common exec record; the segment's name is `ExecRows.names[segment]`
Row = tuple[int, int, int, str, int, int | None, int | None, int | None, float | None, float | None]


def _tail(raw: bytes) -> Tail | None:
    """The tail's fields, or None when `_decode` would refuse the record or decode it
    otherwise (then the record takes the general path)."""
    if raw.count(b"\0") != raw.count(b"\0="):
        return None
    f = raw.split(b"\0=")
    if len(f) < 9:
        return None
    args = tuple(f[9:])
    if not (f[8].isdigit() and len(f[8]) <= 18 and int(f[8]) == len(args)):
        return None
    cwd, cwd_unknown = f[0], ""
    if not cwd.startswith(b"/"):
        cwd, cwd_unknown = b"", execlog._cwd_reason(cwd)
    red = f[6]
    pcmd, pargv = parent_fields(f[7])
    return Tail(
        cwd,
        cwd_unknown,
        f[1].decode("utf-8", "replace"),
        f[2],
        f[3],
        f[4].decode("utf-8", "replace"),
        f[5],
        execlog._redactions(red) if red else (),
        pcmd,
        args,
        pargv,
    )


class ExecRows:
    """Reads exec logs as rows and records; `tails` and `names` index the rows' fields."""

    def __init__(self, anchors: Anchors | None = None, max_tails: int | None = None) -> None:
        self.anchors = anchors if anchors is not None else Anchors(None)
        #: with `max_tails`, the tables start again when full and `epoch` counts up: a
        #: row's tail index holds until the next row is read (keep the Tail, not the index)
        self.max_tails = max_tails
        self.epoch = 0
        self.tails: list[Tail] = []
        self._tail_ids: dict[bytes, int] = {}
        self._tail_nuls: list[int] = []
        self.names: list[str] = []
        self._btimes: dict[bytes, float | None] = {}
        self._boots: dict[bytes, str] = {}
        #: the piece the item last yielded came from: its offset and where it ends (after
        #: its end marker); the session index keeps each session's records as such spans
        self.at = self.end = 0

    def read(
        self,
        stream: Readable,
        name: str,
        spill_dir: Path | None,
        problems: list[LogProblem],
        base: int = 0,
    ) -> Iterator[Row | Record]:
        """Rows for common exec records, records for the rest, in log order."""
        seg = len(self.names)
        self.names.append(name)
        tail_ids, btimes, boots = self._tail_ids, self._btimes, self._boots
        anchors = self.anchors
        general = execlog.decode_piece
        for pos, piece in pieces(stream, name, problems, base):
            if piece.startswith(_HEAD):
                parts = piece.split(b"\0=", 10)
                if len(parts) == 11:
                    _, _, _, bt, up, boot_b, pid_b, ppid_b, st_b, pst_b, raw = parts
                    tid = tail_ids.get(raw)
                    if tid is None:
                        tid = self._add_tail(raw)
                    if (
                        tid >= 0
                        and piece.count(b"\0") == self._tail_nuls[tid]
                        and pid_b.isdigit()
                        and len(pid_b) <= 18
                    ):
                        boot = boots.get(boot_b)
                        if boot is None:
                            boot = boots[boot_b] = boot_b.decode("ascii", "replace")
                        if bt:
                            btime = btimes.get(bt, 0.0)
                            if btime == 0.0:
                                btime = btimes[bt] = clock_seconds(bt)
                        else:
                            btime = anchors.get(boot)
                        self.at, self.end = pos, pos + len(piece) + 2
                        yield (
                            seg,
                            pos,
                            tid,
                            boot,
                            int(pid_b),
                            int(ppid_b) if ppid_b.isdigit() and len(ppid_b) <= 18 else _int(ppid_b),
                            int(st_b) if st_b.isdigit() and len(st_b) <= 18 else _int(st_b),
                            None  # the parent's start: a shim rarely knows it
                            if not pst_b
                            else int(pst_b)
                            if pst_b.isdigit() and len(pst_b) <= 18
                            else _int(pst_b),
                            btime,
                            clock_seconds(up),
                        )
                        continue
            rec = general(pos, piece, name, spill_dir, problems, anchors)
            if rec is not None:
                self.at, self.end = pos, pos + len(piece) + 2
                yield rec

    def _add_tail(self, raw: bytes) -> int:
        """The new tail's index, -1 for one the fast path does not take (remembered too:
        the same malformed bytes repeat)."""
        if self.max_tails is not None and len(self._tail_ids) >= self.max_tails:
            self.tails.clear()  # in place: readers hold the list
            self._tail_nuls.clear()
            self._tail_ids.clear()
            self.epoch += 1
        tail = _tail(raw)
        tid = -1
        if tail is not None:
            tid = len(self.tails)
            self.tails.append(tail)
            self._tail_nuls.append(_HEAD_NULS + raw.count(b"\0"))
        self._tail_ids[raw] = tid
        return tid

    def where(self, row: Row) -> str:
        return f"{self.names[row[0]]}@{row[1]}"

    def record(self, row: Row, tail: Tail | None = None) -> ExecRecord:
        """The `ExecRecord` execlog.read_stream makes of this row's record (`tail`: its
        tail, kept by a reader that reads on before it asks, see `max_tails`)."""
        t = self.tails[row[2]] if tail is None else tail
        return _make_exec(
            row[8],
            row[9],
            row[3],
            row[4],
            row[5],
            row[6],
            row[7],
            t.cwd,
            t.shim,
            t.target,
            t.invoked_as,
            t.session,
            t.path,
            t.redactions,
            t.args,
            self.where(row),
            t.parent_cmdline,
            "exec",
            t.cwd_unknown,
            t.parent_argv,
        )

    def iter_log(self, loc: Locations, problems: list[LogProblem]) -> Iterator[Row | Record]:
        """Every segment's rows and records, in log order, as `execlog.iter_records` reads
        them (all segments opened first, regular files only; a missing log is an error)."""
        if not loc.log_dir.is_dir():
            raise InputError(f"no exec log at {loc.log_dir} (run `mcpshim install` first)")
        files: list[tuple[str, BinaryIO]] = []
        try:
            for p in execlog.segments(loc):
                with contextlib.suppress(FileNotFoundError):
                    files.append((p.name, open_regular(p)))
        except BaseException:
            for _, fh in files:
                fh.close()
            raise
        self.anchors = Anchors(loc.boot_dir)
        return self._all(loc, files, problems)

    def _all(
        self, loc: Locations, files: list[tuple[str, BinaryIO]], problems: list[LogProblem]
    ) -> Iterator[Row | Record]:
        try:
            for name, fh in files:
                yield from self.read(fh, name, loc.spill_dir, problems)
        finally:
            for _, fh in files:
                fh.close()


_int = execlog._int
_make_exec = execlog._make_exec
