"""One segment's seals against its bytes: which ranges still hash to what was sealed, and
where the damage is when one does not.

Ranges are checked where the seals say they are. When one does not hash, the damage may
have moved everything after it (a record removed or inserted), so the next seal's range is
looked for ending at a record boundary just before that seal (where the sealer found it):
if it hashes there, the log is whole again from that point, and the damage is exactly the
bytes between the last good range and this one; its length against the sealed length says
whether bytes were removed, inserted, or changed in place.
"""

from __future__ import annotations

import bisect
import contextlib
import io
import mmap
from dataclasses import dataclass
from pathlib import Path

from mcpshim.log import execlog
from mcpshim.seal.record import Buffer, Seal, find_seals, head_of, mapped, sha256_of, spill_digest

__all__ = [
    "Damage",
    "Found",
    "RecordRef",
    "SegmentScan",
    "count_records",
    "records_in",
    "scan_segment",
]

SEARCH_BYTES = 256 * 1024  # how far before a seal its range may end (shims wrote meanwhile)
SEARCH_ENDS = 64  # record boundaries tried there
MAX_SEARCHES = 32  # per segment: a log garbled throughout must not cost hours
DROP_EVERY = 64 << 20  # give mapped pages back every 64 MiB (RSS stays small)
RECORDS_SHOWN = 20


@dataclass(frozen=True)
class Found:
    """A seal record as the log holds it."""

    file: str
    index: int  # the file's place among the segments, oldest first
    at: int
    end: int
    seal: Seal
    head: str

    @property
    def where(self) -> str:
        return f"{self.file}@{self.at}"


@dataclass(frozen=True)
class RecordRef:
    where: str
    kind: str
    session: str | None
    time: str


@dataclass(frozen=True)
class Damage:
    """Bytes [start, end) of a segment (as it is now) that no longer hash as sealed."""

    file: str
    start: int
    end: int
    seals: tuple[int, ...]  # the seals whose ranges fail
    delta: int | None  # length now minus length sealed; None when nothing after it verified
    records: tuple[RecordRef, ...] = ()
    record_count: int = 0


@dataclass(frozen=True)
class SegmentScan:
    name: str
    index: int
    size: int
    seals: tuple[Found, ...]
    bad: tuple[tuple[int, str], ...]  # seal records that do not parse: (offset, why)
    verified: tuple[tuple[int, int, int], ...]  # (start, end, n) of ranges that hash
    damage: tuple[Damage, ...]
    spills_bad: tuple[Found, ...]  # ranges whose bytes hash but a spill file changed
    jumps: tuple[Found, ...]  # seals whose range does not start where the last one ended
    tail: int  # where the unsealed rest begins (size when all is sealed)
    tail_records: int = 0

    def state_of(self, offset: int) -> str:
        """ "" sealed and intact, "altered", or "unsealed"."""
        i = bisect.bisect_right(self.verified, (offset, 1 << 62, 0)) - 1
        if i >= 0 and self.verified[i][0] <= offset < self.verified[i][1]:
            return ""
        if any(d.start <= offset < d.end for d in self.damage):
            return "altered"
        return "unsealed"


def _realign(buf: Buffer, seal: Seal, lo: int, at: int) -> int | None:
    """Where seal's range starts if it ends at a record boundary shortly before `at`."""
    length = seal.end - seal.start
    end, tried = at, 0
    while end - length >= lo and at - end <= SEARCH_BYTES and tried < SEARCH_ENDS:
        if sha256_of(buf, end - length, end) == seal.sha256:
            return end - length
        tried += 1
        q = buf.rfind(b"\0\n", lo, end - 1)
        if q < 0:
            return None
        end = q + 2
    return None


def count_records(buf: Buffer, start: int, end: int) -> int:
    """Records ending in buf[start:end], counted 16 MiB at a time."""
    step = 16 << 20
    return sum(buf[a : min(a + step, end)].count(b"\0\n") for a in range(start, end, step))


def records_in(
    buf: Buffer, name: str, start: int, end: int, spill_dir: Path
) -> tuple[tuple[RecordRef, ...], int]:
    """The first records in buf[start:end] (where, kind, session) and how many there are."""
    problems: list[execlog.LogProblem] = []
    stream = io.BytesIO(bytes(buf[start:end]))
    refs: list[RecordRef] = []
    count = 0
    for rec in execlog.read_stream(stream, name, spill_dir, problems):
        count += 1
        if len(refs) < RECORDS_SHOWN:
            refs.append(_ref(rec, name, start))
    for p in problems:
        count += 1
        if len(refs) < RECORDS_SHOWN:
            refs.append(RecordRef(_shift(p.where, name, start), "damaged", None, p.message))
    return tuple(refs), count


def _shift(where: str, name: str, base: int) -> str:
    head, _, rest = where.partition("@")
    off, _sp, more = rest.partition(" ")
    if head != name or not off.isdigit():
        return where
    return f"{name}@{int(off) + base}" + (f" {more}" if more else "")


def _ref(rec: execlog.Record, name: str, base: int) -> RecordRef:
    if isinstance(rec, execlog.ExecRecord):
        t = rec.time.isoformat() if rec.time else ""
        kind = f"exec {rec.shim}"
    else:
        t, kind = str(rec.data.get("time", "")), rec.kind
    return RecordRef(_shift(rec.where, name, base), kind, execlog.session_of(rec), t)


def _drop(buf: Buffer, upto: int, dropped: int) -> int:
    """Give back mapped pages before `upto` (they are page cache: RSS, not memory)."""
    if (
        isinstance(buf, mmap.mmap)
        and upto - dropped >= DROP_EVERY
        and hasattr(mmap, "MADV_DONTNEED")
    ):
        start = dropped - dropped % mmap.PAGESIZE
        with contextlib.suppress(OSError):
            buf.madvise(mmap.MADV_DONTNEED, start, upto - start - (upto - start) % mmap.PAGESIZE)
        return upto
    return dropped


def scan_segment(fd: int, name: str, index: int, size: int, spill_dir: Path) -> SegmentScan:
    with mapped(fd, size) as buf:
        return _Scan(buf, name, index, size, spill_dir).run()


class _Scan:
    def __init__(self, buf: Buffer, name: str, index: int, size: int, spill_dir: Path) -> None:
        self.buf, self.name, self.index, self.size, self.spill_dir = (
            buf,
            name,
            index,
            size,
            spill_dir,
        )
        self.found: list[Found] = []
        self.bad: list[tuple[int, str]] = []
        self.verified: list[tuple[int, int, int]] = []
        self.damage: list[Damage] = []
        self.spills_bad: list[Found] = []
        self.jumps: list[Found] = []

    def run(self) -> SegmentScan:
        cur = shift = recorded_end = searches = dropped = 0
        bad_from: int | None = None  # where the failing stretch starts (as the file is now)
        bad_seals: list[int] = []
        bad_recorded = bad_last = 0
        for at, end, seal, why in find_seals(self.buf, 0, self.size):
            if seal is None:
                self.bad.append((at, why))
                continue
            found = Found(self.name, self.index, at, end, seal, head_of(self.buf[at:end]))
            self.found.append(found)
            if seal.start != recorded_end:
                self.jumps.append(found)
            recorded_end = seal.end
            length = seal.end - seal.start
            start = self._locate(seal, seal.start + shift, at)
            if start is None and searches < MAX_SEARCHES:
                searches += 1
                start = _realign(self.buf, seal, cur if bad_from is None else bad_from, at)
            if start is None:
                if bad_from is None:
                    bad_from, bad_recorded, bad_seals = cur, seal.start, []
                bad_seals.append(seal.n)
                bad_last = at
                continue
            if bad_from is not None:
                sealed = seal.start - bad_recorded
                self._damage(bad_from, start, tuple(bad_seals), (start - bad_from) - sealed)
                bad_from = None
            elif start > cur and found not in self.jumps:
                self._damage(cur, start, (seal.n,), start - cur)  # bytes put before this range
            self.verified.append((start, start + length, seal.n))
            # The bytes hash as sealed, so they hold the pointers the sealer saw: none
            # when it recorded no digest (the common case costs no scan).
            if (
                seal.spills
                and spill_digest(self.buf, start, start + length, self.spill_dir) != seal.spills
            ):
                self.spills_bad.append(found)
            cur, shift = start + length, start + length - seal.end
            dropped = _drop(self.buf, cur, dropped)
        if bad_from is not None:
            self._damage(bad_from, max(bad_last, bad_from), tuple(bad_seals), None)
            cur = max(bad_last, bad_from)
        tail_records = 0
        if cur < self.size and self.found:  # a segment never sealed is counted in bytes
            tail_records = count_records(self.buf, cur, self.size)
            tail_records -= sum(1 for f in self.found if f.at >= cur)
        return SegmentScan(
            self.name,
            self.index,
            self.size,
            tuple(self.found),
            tuple(self.bad),
            tuple(self.verified),
            tuple(self.damage),
            tuple(self.spills_bad),
            tuple(self.jumps),
            cur,
            max(tail_records, 0),
        )

    def _locate(self, seal: Seal, start: int, at: int) -> int | None:
        """`start` if the seal's range hashes there (and lies before the seal itself)."""
        end = start + seal.end - seal.start
        if start < 0 or end > at:
            return None
        return start if sha256_of(self.buf, start, end) == seal.sha256 else None

    def _damage(self, start: int, end: int, seals: tuple[int, ...], delta: int | None) -> None:
        refs, count = records_in(self.buf, self.name, start, end, self.spill_dir)
        self.damage.append(Damage(self.name, start, end, seals, delta, refs, count))
