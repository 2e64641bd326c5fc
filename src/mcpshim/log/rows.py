"""Exec records as rows: what links a process decoded per record, the rest once per tail.

`ExecRows.read` cuts a common exec record into its ten leading fields and its tail,
decodes the integers and clocks, and looks the tail up in a table that decodes each
distinct one once (log.execfields: the reader's own decoding, as execlog's reader does).
Every other piece (an event, a spill pointer, a torn or malformed record, a pid of 19
digits...) goes through `execlog.decode_piece`, so the records read and the problems said
are the same as `execlog.read_stream`'s. The session index reads a segment through it too
(log.indexscan): every reader decodes a record one way.

`ExecRows.record(row)` gives the very `ExecRecord` the reader would have made, for the
few a command keeps (evidence, a family's first image).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from mcpshim.base.fdio import open_regular
from mcpshim.errors import InputError
from mcpshim.log import execlog
from mcpshim.log.boot import Anchors, clock_seconds
from mcpshim.log.execfields import EXEC_HEAD, TAIL_AT, Tail, Tails
from mcpshim.log.execfields import int_field as _int
from mcpshim.log.execlog import ExecRecord, LogProblem, Record, exec_record
from mcpshim.log.framing import Readable, pieces
from mcpshim.paths import Locations

__all__ = ["ExecRows", "Row"]


#: (segment index, offset, tail index, boot id, pid, ppid, start, parent start, btime,
#: uptime): a common exec record; the segment's name is `ExecRows.names[segment]`
Row = tuple[int, int, int, str, int, int | None, int | None, int | None, float | None, float | None]


class ExecRows:
    """Reads exec logs as rows and records; `tails` and `names` index the rows' fields."""

    def __init__(self, anchors: Anchors | None = None, max_tails: int | None = None) -> None:
        self.anchors = anchors if anchors is not None else Anchors(None)
        #: with `max_tails`, the tables start again when full and `epoch` counts up: a
        #: row's tail index holds until the next row is read (keep the Tail, not the index)
        self._tails = Tails(max_tails)
        self.tails: list[Tail] = self._tails.tails
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
        btimes, boots = self._btimes, self._boots
        anchors, tails = self.anchors, self._tails
        index, ids, nuls = tails.index, tails.ids, tails.nuls
        general = execlog.decode_piece
        for pos, piece in pieces(stream, name, problems, base):
            if piece.startswith(EXEC_HEAD):
                parts = piece.split(b"\0=", TAIL_AT)
                if len(parts) == TAIL_AT + 1:
                    _, _, _, bt, up, boot_b, pid_b, ppid_b, st_b, pst_b, raw = parts
                    tid = ids.get(raw)
                    if tid is None:
                        tid = index(raw)
                    if (
                        tid >= 0
                        and piece.count(b"\0") == nuls[tid]
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
            rec = general(pos, piece, name, spill_dir, problems, anchors, tails)
            if rec is not None:
                self.at, self.end = pos, pos + len(piece) + 2
                yield rec

    @property
    def epoch(self) -> int:
        return self._tails.epoch

    def where(self, row: Row) -> str:
        return f"{self.names[row[0]]}@{row[1]}"

    def record(self, row: Row, tail: Tail | None = None) -> ExecRecord:
        """The `ExecRecord` execlog.read_stream makes of this row's record (`tail`: its
        tail, kept by a reader that reads on before it asks, see `max_tails`)."""
        t = self.tails[row[2]] if tail is None else tail
        return exec_record(row[8], row[9], row[3], row[4], row[5], row[6], row[7], t,
                           self.where(row))  # fmt: skip

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
