"""The checks `log verify` makes of the log itself once its segments are scanned: each
segment's damage and numbering, the chain's links and dates, what rotation removed, and
the window. Each finding is a Problem of one kind (TAMPERING or GAPS), or a note; the checks
against the verifier, the state file and the anchors are in `against`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from mcpshim.base.fdio import open_regular_fd
from mcpshim.errors import InputError
from mcpshim.log.events import event_data
from mcpshim.paths import Locations
from mcpshim.seal import keys
from mcpshim.seal.ranges import Found, RecordRef, SegmentScan, count_records
from mcpshim.seal.record import mapped

__all__ = ["GAPS", "TAMPERING", "Checks", "Problem", "Window", "covered", "ns_text", "span"]

#: what someone did to the log
TAMPERING = frozenset(
    {
        "altered",
        "removed",
        "inserted",
        "spill-altered",
        "bad-seal",
        "chain",
        "forged",
        "foreign-key",
        "truncated",
        "missing-segment",
        "anchor-mismatch",
        "state-mismatch",
        "marker",
        "boot-anchor",
        "index",
    }
)
#: what was never sealed (or cannot be checked) where it should have been
GAPS = frozenset(
    {"never-sealed", "start-missing", "unsealed-segment", "no-anchors", "boot-anchor-clock"}
)


@dataclass(frozen=True)
class Problem:
    kind: str
    where: str
    message: str
    seals: tuple[int, ...] = ()
    records: tuple[RecordRef, ...] = ()
    record_count: int = 0


@dataclass(frozen=True)
class Window:
    """How far behind the seals ran: the window in which records were unprotected."""

    seals: int = 0
    mean_s: float | None = None
    longest_s: float | None = None
    longest_after: int | None = None  # n of the seal that opened the longest interval
    unsealed_records: int = 0  # after the last seal, in the live segment
    unsealed_from: str = ""  # file@offset
    since_last_s: float | None = None  # age of the last seal


def _time(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class Checks:
    def __init__(self, loc: Locations, scans: list[SegmentScan]) -> None:
        self.loc = loc
        self.scans = scans
        self.problems: list[Problem] = []
        self.notes: list[str] = []
        self.chain = sorted((f for s in scans for f in s.seals), key=lambda f: (f.seal.n, f.file))
        self.by_n = {f.seal.n: f for f in self.chain}
        self._removed_cache: tuple[list[tuple[int, int]], dict[str, str]] | None = None
        self._lost_with_segments: list[tuple[int, int]] = []  # seal runs of missing segments

    def add(self, kind: str, where: str, message: str, **kw: object) -> None:
        self.problems.append(Problem(kind, where, message, **kw))  # type: ignore[arg-type]

    # -- each segment's bytes -------------------------------------------------------------

    def segments(self) -> None:
        sealed = [s for s in self.scans if s.seals]
        last_sealed = sealed[-1].index if sealed else -1
        for s in self.scans:
            for at, why in s.bad:
                self.add("bad-seal", f"{s.name}@{at}", f"a seal record that is not one: {why}")
            for d in s.damage:
                kind = "altered" if not d.delta else ("removed" if d.delta < 0 else "inserted")
                what = {
                    "altered": "changed in place (a byte edited, or records reordered)",
                    "removed": f"{-d.delta if d.delta else 0} byte(s) removed",
                    "inserted": f"{d.delta} byte(s) inserted",
                }[kind]
                if d.delta is None:
                    what = "changed; nothing sealed after it verifies"
                self.add(
                    kind,
                    f"{d.file}@{d.start}..{d.end}",
                    f"the bytes sealed by seal(s) {ns_text(d.seals)} no longer hash: {what}",
                    seals=d.seals,
                    records=d.records,
                    record_count=d.record_count,
                )
            for f in s.spills_bad:
                self.add(
                    "spill-altered",
                    f.where,
                    f"a spill file named in the range of seal {f.seal.n} changed or is gone",
                    seals=(f.seal.n,),
                )
            for f in s.jumps:
                self.add(
                    "truncated",
                    f.where,
                    f"seal {f.seal.n} starts at {f.seal.start}, not where the seal before it in "
                    f"{s.name} ended: the sealer found the file cut short there",
                    seals=(f.seal.n,),
                )
            numbers = sorted({f.seal.segment for f in s.seals})
            if len(numbers) > 1:
                self.add("bad-seal", s.name, f"seals of segments {numbers} in one file")
            if not s.seals and s.size and s.index < last_sealed:
                self.add("never-sealed", s.name, f"{s.name} ({s.size} bytes) was never sealed")
            elif s.tail_records and s.index < len(self.scans) - 1 and s.seals:
                self.add(
                    "unsealed-segment",
                    f"{s.name}@{s.tail}..{s.size}",
                    f"{s.tail_records} record(s) at the end of rotated segment {s.name} "
                    "were never sealed",
                )
        self._numbering(sealed)

    def _numbering(self, sealed: list[SegmentScan]) -> None:
        prev: SegmentScan | None = None
        for s in sealed:
            no = s.seals[0].seal.segment
            if prev is not None:
                pno = prev.seals[0].seal.segment
                if no <= pno:
                    self.add("bad-seal", s.name, f"segment {no} after segment {pno}")
                elif no > pno + 1:
                    first, last = prev.seals[-1].seal.n + 1, s.seals[0].seal.n - 1
                    if first <= last:
                        self._lost_with_segments.append((first, last))
                    self.add(
                        "missing-segment",
                        f"between {prev.name} and {s.name}",
                        f"segment(s) {span_text(pno + 1, no - 1)} are missing (deleted), "
                        f"with seal(s) {span_text(first, last) or 'none'}",
                        seals=span(first, last),
                    )
            prev = s

    # -- the chain ----------------------------------------------------------------------

    def chain_links(self) -> None:
        if not self.chain:
            self.add(
                "never-sealed",
                str(self.loc.log_file),
                "the log holds no seal (`mcpshim log seal --init` starts sealing it)",
            )
            return
        first = self.chain[0]
        if first.seal.n == 0 and first.seal.prev:
            self.add("chain", first.where, "seal 0 names a previous seal")
        elif first.seal.n > 0:
            self._start_missing(first)
        for a, b in itertools.pairwise(self.chain):
            if a.seal.n == b.seal.n:
                self.add("chain", b.where, f"two seals numbered {b.seal.n} ({a.where}, {b.where})")
            elif b.seal.n > a.seal.n + 1:
                lo, hi = a.seal.n + 1, b.seal.n - 1
                if not covered(lo, hi, self._lost_with_segments) and not self._pruned(lo, hi, b):
                    self.add(
                        "chain",
                        b.where,
                        f"seal(s) {span_text(lo, hi)} are missing",
                        seals=span(lo, hi),
                    )
            elif b.seal.prev != a.head:
                self.add(
                    "chain",
                    b.where,
                    f"seal {b.seal.n} does not follow seal {a.seal.n} ({a.where}): "
                    "its previous head is another",
                    seals=(b.seal.n,),
                )
            if a.seal.key == b.seal.key and (b.seal.epoch, b.seal.sealer) < (
                a.seal.epoch,
                a.seal.sealer,
            ):
                self.add(
                    "forged",
                    b.where,
                    f"seal {b.seal.n} is signed with an earlier key than seal {a.seal.n}: keys "
                    "only move forward, so one of them was not made by the sealer",
                    seals=(b.seal.n,),
                )
            if b.seal.ms < a.seal.ms:
                self.add(
                    "chain",
                    b.where,
                    f"seal {b.seal.n} is dated before seal {a.seal.n}: seals are made in order",
                    seals=(b.seal.n,),
                )
            if a.seal.key != b.seal.key:
                self.notes.append(f"new key {b.seal.key} from seal {b.seal.n} on (log seal --init)")

    def epochs(self) -> None:
        """Each seal's epoch is the one its time falls in, and no seal is dated ahead."""
        now_ms = int(time.time() * 1000) + keys.FUTURE_SLACK_S * 1000
        for f in self.chain:
            if f.seal.epoch != f.seal.epoch_of_time():
                self.add(
                    "forged",
                    f.where,
                    f"seal {f.seal.n} claims epoch {f.seal.epoch}, but its time "
                    f"{f.seal.time} is in epoch {f.seal.epoch_of_time()}",
                    seals=(f.seal.n,),
                )
            elif f.seal.ms > now_ms:
                self.add(
                    "forged",
                    f.where,
                    f"seal {f.seal.n} is dated {f.seal.time}, in the future",
                    seals=(f.seal.n,),
                )

    def _start_missing(self, first: Found) -> None:
        n = first.seal.n
        if self._pruned(0, n - 1, first):
            self.notes.append(f"seals 0..{n - 1} went with segments `log rotate --keep` removed")
            return
        self.add(
            "start-missing",
            first.where,
            f"the chain starts at seal {n}: what seals 0..{n - 1} covered is gone, and no "
            "rotation says it removed it",
        )

    def _pruned(self, first: int, last: int, after: Found) -> bool:
        """Did `log rotate --keep` remove seals first..last, the last of them before `after`?"""
        gone, heads = self.removed()
        return covered(first, last, gone) and heads.get(str(after.seal.n - 1)) == after.seal.prev

    def removed(self) -> tuple[list[tuple[int, int]], dict[str, str]]:
        """The runs of seal numbers rotation says it removed, and the heads it kept of them."""
        if self._removed_cache is None:
            gone: list[tuple[int, int]] = []
            heads: dict[str, str] = {}
            for s in self.scans:
                for doc in removed_notes(self.loc.log_dir / s.name):
                    with contextlib.suppress(TypeError, ValueError):
                        for a, b in doc.get("seals", ()):
                            if 0 <= int(a) <= int(b):
                                gone.append((int(a), int(b)))
                        heads.update(
                            {str(k): str(v) for k, v in dict(doc.get("heads", {})).items()}
                        )
            self._removed_cache = (gone, heads)
        return self._removed_cache

    def window(self) -> Window:
        times = [(f.seal.n, _time(f.seal.time)) for f in self.chain]
        gaps = [(b[1] - a[1], a[0]) for a, b in itertools.pairwise(times) if a[1] and b[1]]
        live = self.scans[-1] if self.scans else None
        unsealed = live.tail_records if live is not None and live.tail < live.size else 0
        if live is not None and not live.seals and live.size and self.chain:
            unsealed = _count(self.loc.log_dir / live.name, live.size)
        last_t = times[-1][1] if times else None
        now = datetime.now().timestamp()
        longest = longest_gap(gaps)
        return Window(
            seals=len(self.chain),
            mean_s=sum(g for g, _ in gaps) / len(gaps) if gaps else None,
            longest_s=longest[0] if longest else None,
            longest_after=longest[1] if longest else None,
            unsealed_records=unsealed,
            unsealed_from=f"{live.name}@{live.tail}" if unsealed and live else "",
            since_last_s=now - last_t if last_t else None,
        )


#: seal numbers a problem lists at most: its message names the whole span by its ends (a
#: forged seal number must not make verify count to it)
SEALS_LISTED = 1000


def longest_gap(gaps: list[tuple[float, int]]) -> tuple[float, int] | None:
    """The longest (interval, seal that opened it); of equal ones the first (max over the
    pairs took the last seal's number on a tie)."""
    return max(gaps, key=lambda g: g[0]) if gaps else None


def span(first: int, last: int) -> tuple[int, ...]:
    """Seal numbers first..last, the first SEALS_LISTED of them."""
    return tuple(range(first, min(last, first + SEALS_LISTED - 1) + 1))


def span_text(first: int, last: int) -> str:
    return "" if first > last else str(first) if first == last else f"{first}..{last}"


def covered(first: int, last: int, runs: list[tuple[int, int]]) -> bool:
    """Is every number first..last in one of the runs [a, b]?"""
    for a, b in sorted(runs):
        if first > last or a > first:
            break
        first = max(first, b + 1)
    return first > last


def ns_text(ns: tuple[int, ...]) -> str:
    if not ns:
        return ""
    if len(ns) > 2 and ns[-1] - ns[0] == len(ns) - 1:
        return f"{ns[0]}..{ns[-1]}"
    return ", ".join(str(n) for n in ns[:10]) + (", ..." if len(ns) > 10 else "")


_REMOVED = b"\0R\0=1\0=segments-removed\0="


def removed_notes(path: Path) -> Iterator[dict[str, Any]]:
    """The `segments-removed` records rotation left in a segment (read only when the
    chain's beginning or a stretch of it is missing)."""
    try:
        fd = open_regular_fd(path)
    except (OSError, InputError):
        return
    try:
        size = os.fstat(fd).st_size
        with mapped(fd, size) as buf:
            pos = 0
            while (p := buf.find(_REMOVED, pos, size)) >= 0:
                e = buf.find(b"\0\n", p, size)
                if e < 0:
                    return
                with contextlib.suppress(ValueError):  # checked as the reader checks it
                    yield event_data(buf[p + len(_REMOVED) : e])
                pos = e + 2
    finally:
        os.close(fd)


def _count(path: Path, size: int) -> int:
    """Records in a segment no seal covers (a new live log the sealer has not reached)."""
    try:
        fd = open_regular_fd(path)
    except (OSError, InputError):
        return 0
    try:
        with mapped(fd, min(size, os.fstat(fd).st_size)) as buf:
            return count_records(buf, 0, len(buf))
    finally:
        os.close(fd)
