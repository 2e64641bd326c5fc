"""Review a large log with two processes: each streams one half, then the halves are joined.

Decoding dominates a review, and it parallelises cleanly: the log is cut at a record
boundary near its middle, a forked child scans the second half while this process scans
the first, and `review.fold` joins them (the child's missing parents are looked up among the
first half's processes, see `tree.Linker.absorb`). Files are opened before the fork and
read with pread, so the two processes never share a file offset and a rotation during the
review loses nothing. Small logs, one CPU, or no fork: one pass, as `review.review`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import io
import multiprocessing
import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass

from mcpshim.base import fdio
from mcpshim.errors import InputError
from mcpshim.family.attribution import Collector, log_has_relayed_sessions
from mcpshim.family.coverage import CoverageCollector
from mcpshim.log import execlog
from mcpshim.log.execlog import LogProblem, Record
from mcpshim.log.indexscan import MARKED
from mcpshim.log.ledger import SHELLS, Ledger, ident_key
from mcpshim.log.rows import ExecRows, Row
from mcpshim.log.scope import scope as session_scope
from mcpshim.paths import Locations
from mcpshim.review.baseline import Baseline
from mcpshim.review.engine import (
    MEMO_CAP,
    Progress,
    ReviewResult,
    Scan,
    coverage_of,
    fold,
    make_context,
    scan,
)
from mcpshim.review.findings import Evidence
from mcpshim.review.policy import Policy
from mcpshim.review.rules.registry import Context
from mcpshim.review.rules.session_rules import SessionEvidence
from mcpshim.shim.manifest import Manifest

__all__ = ["SPLIT_MIN", "review_log"]

SPLIT_MIN = 64 << 20  # below this a second process costs more than it saves
_WINDOW = 1 << 20


@dataclass(frozen=True)
class _Range:
    fd: int
    name: str
    start: int
    end: int


class _PRead:
    """A file-like view of [start, end) of a descriptor, read with pread (no shared offset)."""

    def __init__(self, r: _Range) -> None:
        self.r = r
        self.pos = r.start

    def read(self, n: int = -1) -> bytes:
        left = self.r.end - self.pos
        if n < 0 or n > left:
            n = left
        if n <= 0:
            return b""
        data = os.pread(self.r.fd, n, self.pos)
        self.pos += len(data)
        return data


_SESSION_ID = MARKED


def _marked_sessions(loc: Locations) -> tuple[set[str], set[str]]:
    """The ids of every session run with --mcp, and of every traced session whose trace
    was summarized, by a byte scan (no decoding): each half of a split review then makes
    the same process model as one pass (log.ledger.presume)."""
    found: tuple[set[str], set[str]] = (set(), set())
    if not loc.log_dir.is_dir():
        return found
    tail = b""
    for seg in execlog.segments(loc):
        try:
            with seg.open("rb") as fh:
                while chunk := fh.read(1 << 22):
                    buf = tail + chunk
                    for kind, sid in _SESSION_ID.findall(buf):
                        found[kind == b"trace-summary"].add(sid.decode("utf-8", "replace"))
                    tail = buf[-256:]
        except OSError:
            continue
    return found


def relayed_sessions(loc: Locations) -> set[str]:
    """The ids of every session run with --mcp, by a byte scan (no decoding)."""
    if not loc.log_dir.is_dir() or not log_has_relayed_sessions(loc):
        return set()
    return _marked_sessions(loc)[0]


def _plan(fds: list[tuple[int, str, int]]) -> tuple[list[_Range], list[_Range]] | None:
    total = sum(size for _, _, size in fds)
    if total < SPLIT_MIN:
        return None
    mid = total // 2
    before = 0
    for i, (fd, name, size) in enumerate(fds):
        if before + size <= mid:
            before += size
            continue
        local = mid - before
        window = os.pread(fd, _WINDOW, local)
        hits = [p for p in (window.find(b"\0\n\0R"), window.find(b"\0\n\0P")) if p >= 0]
        if not hits:
            return None
        cut = local + min(hits) + 2
        first = [_Range(f, n, 0, s) for f, n, s in fds[:i]] + [_Range(fd, name, 0, cut)]
        second = [_Range(fd, name, cut, size)] + [_Range(f, n, 0, s) for f, n, s in fds[i + 1 :]]
        return first, second
    return None


def _rows(loc: Locations) -> ExecRows:
    """A row reader whose tail table stays bounded (a log of all-new command lines)."""
    return ExecRows(execlog.Anchors(loc.boot_dir), max_tails=MEMO_CAP)


def _records(
    loc: Locations, rows: ExecRows, ranges: list[_Range], problems: list[LogProblem]
) -> Iterator[Row | Record]:
    for r in ranges:
        yield from rows.read(_PRead(r), r.name, loc.spill_dir, problems)


def _shift(where: str, name: str, offset: int) -> str:
    """read_stream counts offsets from where it started reading: make them file offsets."""
    seg, at, rest = where.partition("@")
    num, sp, tail = rest.partition(" ")
    if seg != name or not at or not num.isdigit():
        return where
    return f"{seg}@{int(num) + offset}{sp}{tail}"


def _fix_offsets(result: Scan, problems: list[LogProblem], r: _Range) -> None:
    for a in result.acc.values():
        a.evidence = [
            Evidence(_shift(e.where, r.name, r.start), e.text, e.data) for e in a.evidence
        ]
    result.events = [
        dataclasses.replace(ev, where=_shift(ev.where, r.name, r.start)) for ev in result.events
    ]
    problems[:] = [LogProblem(_shift(p.where, r.name, r.start), p.message) for p in problems]
    if result.coverage is not None:
        result.coverage.map_where(lambda w: _shift(w, r.name, r.start))


_PRIME = 4 << 20  # bytes before the cut read to prime the second half's ledger


def _ledger(loc: Locations, summarized: set[str], before: _Range | None) -> Ledger:
    """A ledger that decides as one pass would: summarized traces presumed, and (the
    second half) the shells and samples just before the cut remembered."""
    ledger = Ledger()
    for sid in summarized:
        ledger.presume(sid)
    if before is None or before.end <= before.start:
        return ledger
    lo = max(before.start, before.end - _PRIME)
    window = os.pread(before.fd, before.end - lo, lo)
    at = 0 if lo == before.start else window.find(b"\0\n") + 2
    if at < 2 and lo != before.start:
        return ledger
    stream = io.BytesIO(window[at:])
    for rec in execlog.read_stream(stream, before.name, loc.spill_dir, [], execlog.Anchors(None)):
        if isinstance(rec, execlog.ExecRecord) and rec.shim in SHELLS:
            ledger.prime(ident_key(rec.boot_id, rec.pid, rec.start))
        elif isinstance(rec, execlog.EventRecord) and rec.kind == "observed":
            d = rec.data
            ledger.prime(ident_key(d.get("boot_id") or "", d.get("pid"), d.get("start")))
    return ledger


def _scan_part(
    loc: Locations,
    ranges: list[_Range],
    ctx: Context,
    session: str | None,
    relayed: set[str],
    ledger: Ledger | None = None,
) -> tuple[Scan, list[LogProblem]]:
    problems: list[LogProblem] = []
    cov = CoverageCollector(session)
    rows = _rows(loc)
    result = scan(
        _records(loc, rows, ranges, problems),
        ctx,
        session,
        keep_events=True,
        relayed=relayed,
        coverage=cov,
        rows=rows,
        ledger=ledger,
    )
    _fix_offsets(result, problems, ranges[0])
    return result, problems


def _child(
    conn: object,
    loc: Locations,
    ranges: list[_Range],
    ctx: Context,
    sess: str | None,
    relayed: set[str],
    ledger: Ledger,
) -> None:
    # Pickled first and its objects let go before the bytes go out: while the parent
    # reads and unpickles them, this process holds the bytes alone (the two processes'
    # memory together peaks here)
    data = pickle.dumps(
        _scan_part(loc, ranges, ctx, sess, relayed, ledger), pickle.HIGHEST_PROTOCOL
    )
    gc.collect()
    conn.send_bytes(data)  # type: ignore[attr-defined]
    conn.close()  # type: ignore[attr-defined]


def review_log(
    loc: Locations,
    problems: list[LogProblem],
    *,
    policy: Policy,
    session: str | None = None,
    shim_dir: str | None = None,
    manifest: Manifest | None = None,
    baseline: Baseline | None = None,
    progress: Progress | None = None,
    workers: int | None = None,
    collector: Collector | None = None,
) -> ReviewResult:
    """Review every segment of the log at `loc`, in two processes when it pays; one
    session's part of it (log.scope) in one pass, teed through `collector` when given."""
    ctx = make_context(policy, shim_dir, manifest, baseline)
    session_ev = SessionEvidence(policy, ctx.shim_names(), session)
    can_fork = "fork" in multiprocessing.get_all_start_methods()
    parallel = (workers or os.cpu_count() or 1) > 1 and can_fork
    if not loc.log_dir.is_dir():
        raise InputError(f"no exec log at {loc.log_dir} (run `mcpshim install` first)")
    sc = session_scope(loc, session)
    if sc is not None:  # one session's part of the log (log.scope): one pass
        rows = _rows(loc)
        items = sc.rows(rows, problems)
        items = items if collector is None else collector.tee_rows(items, rows)
        one = scan(items, ctx, session, progress, session_ev=session_ev,
                   relayed={sc.session} if sc.relayed else set(),
                   coverage=CoverageCollector(session), rows=rows)  # fmt: skip
        if progress is not None:
            progress(one.records, "")
        return fold([one], policy, session_ev.findings(), coverage_of([one], ctx))
    relayed = relayed_sessions(loc)
    with contextlib.ExitStack() as stack:
        fds: list[tuple[int, str, int]] = []
        for p in execlog.segments(loc):
            with contextlib.suppress(FileNotFoundError):
                fd = fdio.open_regular_fd(p)  # a FIFO would block the read
                stack.callback(os.close, fd)
                fds.append((fd, p.name, os.fstat(fd).st_size))
        plan = _plan(fds) if parallel else None

        def here(ranges: list[_Range], ledger: Ledger | None = None) -> Scan:
            """Scan in this process, feeding the session events and the progress line."""
            rows = _rows(loc)
            return scan(
                _records(loc, rows, ranges, problems),
                ctx,
                session,
                progress,
                session_ev=session_ev,
                relayed=relayed,
                coverage=CoverageCollector(session),
                rows=rows,
                ledger=ledger,
            )

        if plan is None:
            whole = [_Range(fd, name, 0, size) for fd, name, size in fds]
            one = here(whole)
            if progress is not None:
                progress(one.records, "")
            return fold([one], policy, session_ev.findings(), coverage_of([one], ctx))
        first, second = plan
        summarized = _marked_sessions(loc)[1]
        cut = first[-1]
        later = _ledger(loc, summarized, cut if cut.fd == second[0].fd else None)
        mp = multiprocessing.get_context("fork")
        recv, send = mp.Pipe(duplex=False)
        child = mp.Process(
            target=_child, args=(send, loc, second, ctx, session, relayed, later), daemon=True
        )
        child.start()
        send.close()
        try:
            part1 = here(first, _ledger(loc, summarized, None))
            try:
                # our own forked child's bytes over a private pipe (what recv() unpickles)
                part2, problems2 = pickle.loads(recv.recv_bytes())  # noqa: S301
            except EOFError:  # the child died: do its half here
                part2, problems2 = _scan_part(loc, second, ctx, session, relayed, later)
        finally:
            recv.close()
            child.join()
        if progress is not None:
            progress(part1.records + part2.records, "")
    for ev in part2.events:
        session_ev.feed(ev)
    problems += problems2
    coverage = coverage_of([part1, part2], ctx)
    return fold([part1, part2], policy, session_ev.findings(), coverage)
