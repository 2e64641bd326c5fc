"""`tree`'s reading of a whole log into a compact forest (family.compact), from rows.

`log.rows` gives a shim's common exec record as a row, its tail decoded once; here a row
goes into the columns without becoming an `ExecRecord` or an `Image`, the coverage
collector is fed its fields, and every other record takes `build_compact_forest`'s path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from mcpshim.family.compact import _Columns, forest_of
from mcpshim.family.coverage import CoverageCollector
from mcpshim.family.tree import Forest
from mcpshim.log.execlog import EventRecord, Record, session_of
from mcpshim.log.rows import ExecRows, Row

__all__ = ["read_compact_forest"]


def read_compact_forest(
    items: Iterable[Row | Record],
    rows: ExecRows,
    session: str | None,
    cov: CoverageCollector,
    on_event: Callable[[EventRecord], None],
) -> tuple[Forest, bool]:
    """`build_compact_forest` over `log.rows`' rows and records, feeding `cov` every one
    and `on_event` each event record; and whether any record is of `session` (a session
    that matches nothing is a typo, see execlog.SessionSeen)."""
    cols = _Columns()
    seen = session is None
    sids: list[int] = []  # rows' tail index -> static here
    segs: list[int] = []  # rows' segment index -> segment here
    tails = rows.tails
    for item in items:
        if isinstance(item, tuple):
            row: Row = item
            tid = row[2]
            tail = tails[tid]
            sess = tail.session
            if cov.feed_exec(
                sess,
                tail.shim,
                row[3],
                row[4],
                row[6],
                bool(tail.parent_cmdline) and row[5] is not None,
            ):
                cov.parent_record(rows.record(row))
            if session is not None and sess != session:
                continue
            seen = True
            while len(sids) <= tid:
                sids.append(-1)
            sid = sids[tid]
            if sid < 0:
                sid = sids[tid] = cols._static(tail)
            while len(segs) <= row[0]:
                segs.append(cols._seg(rows.names[len(segs)]))
            cols.add_row(row, sid, segs[row[0]], sess)
            continue
        rec = item
        if isinstance(rec, EventRecord):
            on_event(rec)
        cov.feed(rec)
        if not seen and session_of(rec) == session:
            seen = True
        cols.add(rec, session)
    return forest_of(cols), seen
