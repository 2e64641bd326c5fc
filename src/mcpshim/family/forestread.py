"""`tree`'s reading of a whole log into its forest's columns (family.compact), from rows.

`log.rows` gives a shim's common exec record as a row, its tail decoded once; here a row
goes into the columns without becoming an `ExecRecord` or an `Image`, the coverage
collector is fed its fields, and every other record goes through the process model
(family.model) into the columns as an image.
Rows are linked a run at a time (`Linker.add_many`, up to `RUN` rows, a run ends at any
other record so the log's order holds) and their columns extended a run at a time.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable
from operator import add
from typing import cast

from mcpshim.family.compact import _MAX, _NONE, _WIDE, Columns
from mcpshim.family.coverage import CoverageCollector
from mcpshim.family.model import Assembler, every_session
from mcpshim.family.tree import Forest, forest_of
from mcpshim.log.execlog import EventRecord, Record, session_of
from mcpshim.log.rows import ExecRows, Row

__all__ = ["RUN", "read_forest"]

RUN = 4096  # rows linked in one call: long enough to spread its cost, short to stay small


def read_forest(
    items: Iterable[Row | Record],
    rows: ExecRows,
    session: str | None,
    cov: CoverageCollector,
    on_event: Callable[[EventRecord], None],
) -> tuple[Forest, bool]:
    """The forest of `log.rows`' rows and records (of `session`, or all), the process model
    (family.model) feeding `cov`, and `on_event` each event record; and whether any record
    is of `session` (a session that matches nothing is a typo, see execlog.SessionSeen).
    Its roots are made one at a time, as a renderer asks for them (Forest.keep False)."""
    cols = Columns()
    model = Assembler(session, cov, keep_net=every_session)  # the tree shows each exec's sockets
    seen = session is None
    sids: list[int] = []  # rows' tail index -> static here
    segs: list[int] = []  # rows' segment index -> segment here
    run: list[Row] = []
    run_sids: list[int] = []
    run_sessions: list[str] = []
    tails = rows.tails
    for item in items:
        if isinstance(item, tuple):
            row: Row = item
            tid = row[2]
            tail = tails[tid]
            sess = tail.session
            parent = bool(tail.parent_cmdline) and row[5] is not None
            held = model.shim_exec(sess, tail.shim, row[3], row[4], row[6], parent)
            if session is not None and sess != session:
                if held:
                    model.parent_record(rows.record(row))
                continue
            seen = True
            while len(sids) <= tid:
                sids.append(-1)
            sid = sids[tid]
            if sid < 0:
                sid = sids[tid] = cols._static(tail)
            while len(segs) <= row[0]:
                segs.append(cols._seg(rows.names[len(segs)]))
            run.append(row)
            run_sids.append(sid)
            run_sessions.append(sess)
            if held:
                add_rows(cols, run, run_sids, segs, run_sessions)
                run, run_sids, run_sessions = [], [], []
                for img in model.parent_record(rows.record(row)):
                    cols.add_image(img)
            if len(run) >= RUN:
                add_rows(cols, run, run_sids, segs, run_sessions)
                run, run_sids, run_sessions = [], [], []
            continue
        if run:
            add_rows(cols, run, run_sids, segs, run_sessions)
            run, run_sids, run_sessions = [], [], []
        rec = item
        if isinstance(rec, EventRecord):
            on_event(rec)
        if not seen and session_of(rec) == session:
            seen = True
        for img in model.feed(rec):
            cols.add_image(img)
    if run:
        add_rows(cols, run, run_sids, segs, run_sessions)
    for img in model.finish():
        cols.add_image(img)
    return forest_of(cols, model.net, keep=False), seen


def _extend(cols: Columns, col: array[int], values: tuple[int | None, ...]) -> None:
    """`cols._put` of each value: in one call when all are None, or none is None or wider
    than int64."""
    nones = values.count(None)
    if nones == len(values):
        col.extend(array("q", [_NONE]) * nones)
        return
    if not nones:
        ints = cast("tuple[int, ...]", values)
        if min(ints) > _WIDE and max(ints) <= _MAX:
            col.extend(ints)
            return
    for v in values:
        cols._put(col, v)


def add_rows(
    cols: Columns, run: list[Row], sids: list[int], segs: list[int], sessions: list[str]
) -> None:
    """A run of rows kept as shim rows and linked (`Columns.link`), in order: rows of
    `log.rows` whose tail is static `sids[i]` here, whose segment index maps through
    `segs`."""
    n = len(run)
    seg_i, offs, _, boots, pids, ppids, starts, pstarts, btimes, uptimes = zip(*run, strict=True)
    ref0 = len(cols.r_static)
    cols.r_seg.extend(map(segs.__getitem__, seg_i))
    cols.r_off.extend(offs)
    if None in btimes or None in uptimes:
        nan = math.nan
        cols.r_time.extend(
            nan if b is None or u is None else b + u for b, u in zip(btimes, uptimes, strict=True)
        )
    else:
        cols.r_time.extend(map(add, btimes, uptimes))
    _extend(cols, cols.r_ppid, ppids)
    _extend(cols, cols.r_start, starts)
    _extend(cols, cols.r_pstart, pstarts)
    cols.r_static.extend(sids)
    cols.link(boots, pids, ppids, starts, pstarts, sessions, range(ref0, ref0 + n), n)
