"""`mcpshim log verify`: the seals against the log, the chain they form, the keys that
signed them, the sealer's state and the anchors kept elsewhere.

Without a verifier only the plain chain is checked: it catches edits, reorders, removals
and insertions inside sealed ranges, a segment removed from the middle, a seal removed;
it cannot tell a chain recomputed from scratch. With the verifier every seal's MAC is
checked (a rewritten or resealed log fails). The state file catches a tail cut at a seal
boundary; anchors catch that and a whole log replaced, even with the state replaced too.
Beside the log, boot anchors are held to what the seals say of them (seal.boots),
`parents/` markers no record backs are named (seal.markers), and the session index, which
no seal covers, is held to the records it says it read (`index`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from mcpshim.base.fdio import open_regular_fd
from mcpshim.errors import InputError
from mcpshim.log import sessionindex
from mcpshim.log.execlog import segments
from mcpshim.paths import Locations
from mcpshim.seal import against, keys, markers
from mcpshim.seal.anchors import Anchor
from mcpshim.seal.boots import check_boot_anchors
from mcpshim.seal.checks import GAPS, TAMPERING, Checks, Problem, Window
from mcpshim.seal.ranges import Found, SegmentScan, scan_segment
from mcpshim.seal.state import State

__all__ = ["TAMPERING", "Problem", "Verification", "Window", "verify"]


@dataclass(frozen=True)
class Verification:
    verdict: str  # verified | tampered | gaps
    problems: tuple[Problem, ...]
    notes: tuple[str, ...]
    scans: tuple[SegmentScan, ...]
    chain: tuple[Found, ...]  # by n
    keyed: bool  # seals' MACs checked with a verifier
    key_ids: tuple[str, ...]
    anchored_through: int | None
    anchors_checked: int
    window: Window = field(default_factory=Window)

    @property
    def last(self) -> Found | None:
        return self.chain[-1] if self.chain else None

    def mark(self, where: str) -> str:
        """ "" for a record in a range that verified, else "unsealed" or "altered"."""
        name, _, rest = where.partition("@")
        off = rest.split(" ", 1)[0]
        if not off.isdigit():
            return "unsealed"
        for s in self.scans:
            if s.name == name:
                return s.state_of(int(off))
        return "unsealed"


def _scan_all(loc: Locations) -> list[SegmentScan]:
    if not loc.log_dir.is_dir():
        raise InputError(f"no exec log at {loc.log_dir}")
    fds: list[tuple[str, int]] = []
    try:  # all open first: a rotation while we read renames, never loses, a file
        for p in segments(loc):
            with contextlib.suppress(FileNotFoundError):
                fds.append((p.name, open_regular_fd(p)))
        return [
            scan_segment(fd, name, i, os.fstat(fd).st_size, loc.spill_dir)
            for i, (name, fd) in enumerate(fds)
        ]
    finally:
        for _, fd in fds:
            os.close(fd)


def verify(
    loc: Locations,
    verifiers: Sequence[keys.Verifier] = (),
    anchors: Sequence[Anchor] | None = None,
    state: State | None = None,
    parent_markers: bool = True,
) -> Verification:
    """`parent_markers`: also look for markers no record backs (a regular-expression pass
    over the log when there are markers; `log verify` and review's header line both make
    it, so they give one verdict)."""
    scans = _scan_all(loc)
    check = Checks(loc, scans)
    check.segments()
    check.chain_links()
    check.epochs()
    check_boot_anchors(check)
    if verifiers:
        against.macs(check, verifiers)
    if state is not None:
        against.state(check, state, verifiers)
    elif check.chain:
        check.notes.append("no sealer state here: a tail cut at a seal shows only with anchors")
    for where, why in markers.unbacked(loc) if parent_markers else ():
        check.add("marker", where, why)
    for where, why in sessionindex.disagreements(loc) if check.chain else ():
        check.add("index", where, why)  # no seal covers it: held to the records instead
    through, checked = None, 0
    if anchors is not None:
        log_id = os.fsdecode(os.path.abspath(loc.log_dir))
        through, checked = against.anchors(check, anchors, log_id)
    kinds = {p.kind for p in check.problems}
    verdict = "tampered" if kinds & TAMPERING else "gaps" if kinds & GAPS else "verified"
    return Verification(
        verdict,
        tuple(check.problems),
        tuple(dict.fromkeys(check.notes)),
        tuple(scans),
        tuple(check.chain),
        bool(verifiers),
        tuple(dict.fromkeys(f.seal.key for f in check.chain)),
        through,
        checked,
        check.window(),
    )
