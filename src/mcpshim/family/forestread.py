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

from mcpshim.family.compact import _MAX, _NONE, _UNSET, _WIDE, Columns
from mcpshim.family.coverage import CoverageCollector
from mcpshim.family.linker import NOT_NEW
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
    """Each row linked and kept as `Columns.add_image` links and keeps an image (its
    links made as `Columns._link` makes them, a run at a time), in order: rows of
    `log.rows` whose tail is static `sids[i]` here, whose segment index maps through
    `segs`."""
    n = len(run)
    seg_i, offs, _, boots, pids, ppids, starts, pstarts, btimes, uptimes = zip(*run, strict=True)
    links = cols.linker.add_many(boots, pids, ppids, starts, pstarts, sessions)
    ref0, k0 = len(cols.r_static), len(cols.i_ref)
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
    cols.i_ref.extend(range(ref0, ref0 + n))  # each row is its node's next image, in order
    cols.i_next.extend([-1] * n)
    cols.total += n
    while len(cols.parent) < cols.linker.nodes:  # the link columns' blocks, as _new_node
        for col in (cols.parent, cols.kid, cols.kid_last, cols.sib, cols.img, cols.img_last):
            col.extend(_UNSET)
    img, img_last, i_next = cols.img, cols.img_last, cols.i_next
    parent_col, kid, kid_last, sib = cols.parent, cols.kid, cols.kid_last, cols.sib
    unknown, adopted = links.unknown_parent, links.adopted
    new_node = cols._new_node
    count = 0
    k = k0 - 1
    for i, (node, parent) in enumerate(zip(links.node, links.parent, strict=True)):
        k += 1
        if parent == NOT_NEW:  # Columns._link of an image of a known process
            last = img_last[node]
            if last < 0:
                img[node] = k
            else:
                i_next[last] = k
            img_last[node] = k
            continue
        boot = boots[i]
        if parent >= 0 and parent == len(cols.pid) and i in unknown:
            new_node(boot, cols.linker.unknown_pid[parent], None, False)
        new_node(boot, pids[i], starts[i], True)
        img[node] = img_last[node] = k
        count += 1
        if parent >= 0:
            parent_col[node] = parent
            last = kid_last[parent]
            if last < 0:
                kid[parent] = node
            else:
                sib[last] = node
            kid_last[parent] = node
        if adopted and i in adopted:
            orphanage = adopted[i]
            c = kid[orphanage]
            while c >= 0:
                parent_col[c] = node
                c = sib[c]
            kid[node], kid_last[node] = kid[orphanage], kid_last[orphanage]
            kid[orphanage] = kid_last[orphanage] = -1
    cols.count += count
