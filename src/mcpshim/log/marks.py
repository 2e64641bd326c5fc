"""Review marks: which segments a review read, for which session, and what it found.

`review` and `report` append one JSON line per review to `index/reviews.jsonl`, in one
write() with O_APPEND, so concurrent reviews never interleave. `sessions` shows the highest
severity of a session's last review; retention asks `reviewed()` before it drops a segment.
A segment is named as the index names it (device, inode, a hash of its first bytes) with
the size the review saw when it began: what was appended later was not reviewed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mcpshim.base.fdio import open_regular, read_regular
from mcpshim.base.safewrite import make_private_dir, open_append
from mcpshim.errors import InputError
from mcpshim.log.execlog import segments
from mcpshim.paths import Locations

__all__ = ["Review", "last_severity", "load_reviews", "note_review", "reviewed", "segment_refs"]

_HEAD = 512


def _marks(loc: Locations) -> Path:
    return loc.index_dir / "reviews.jsonl"


def _ref(path: Path) -> dict[str, Any] | None:
    try:
        with open_regular(path) as fh:
            st = os.fstat(fh.fileno())
            n = min(_HEAD, st.st_size)
            head = hashlib.sha256(fh.read(n)).hexdigest()
    except (OSError, InputError):
        return None
    return {"dev": st.st_dev, "ino": st.st_ino, "head": head, "head_len": n, "size": st.st_size}


def segment_refs(loc: Locations) -> list[dict[str, Any]]:
    """Every segment as it is now: taken before a review reads, noted after it."""
    if not loc.log_dir.is_dir():
        return []
    return [r for p in segments(loc) if (r := _ref(p)) is not None]


@dataclass(frozen=True)
class Review:
    time: str
    session: str | None  # None: the whole log
    severity: str  # the highest finding's, or "none"
    findings: int
    segments: tuple[Mapping[str, Any], ...]

    def covers(self, path: Path) -> bool:
        """Whether this review read all of the segment at `path` as it is now."""
        now = _ref(path)
        if now is None:
            return False
        for r in self.segments:
            if (r.get("dev"), r.get("ino")) != (now["dev"], now["ino"]):
                continue
            if r.get("size", -1) < now["size"]:
                return False
            n = r.get("head_len", 0)
            if n == now["head_len"]:
                return bool(r.get("head") == now["head"])
            with contextlib.suppress(OSError, InputError), open_regular(path) as fh:
                return bool(r.get("head") == hashlib.sha256(fh.read(n)).hexdigest())
            return False
        return False


def note_review(
    loc: Locations,
    refs: list[dict[str, Any]],
    session: str | None,
    severity: str,
    findings: int,
    when: str,
) -> None:
    """Append one mark; a log directory mcpshim cannot write to is reviewed all the same."""
    line = orjson.dumps(
        {
            "time": when,
            "session": session,
            "severity": severity,
            "findings": findings,
            "segments": refs,
        }
    )
    with contextlib.suppress(OSError):
        make_private_dir(loc.index_dir)
        fd = open_append(_marks(loc))
        try:
            os.write(fd, line + b"\n")
        finally:
            os.close(fd)


def load_reviews(loc: Locations) -> list[Review]:
    out: list[Review] = []
    try:
        data = read_regular(_marks(loc))
    except (OSError, InputError):  # a FIFO in its place: no marks, never a read that blocks
        return out
    for line in data.splitlines():
        try:
            d = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(d, dict):
            continue
        sid = d.get("session")
        segs = d.get("segments")
        out.append(
            Review(
                str(d.get("time", "")),
                sid if isinstance(sid, str) else None,
                str(d.get("severity", "none")),
                int(d.get("findings") or 0),
                tuple(s for s in segs if isinstance(s, dict)) if isinstance(segs, list) else (),
            )
        )
    return out


def last_severity(reviews: Iterable[Review]) -> dict[str, str]:
    """Each session's highest severity in its latest review of its own."""
    out: dict[str, str] = {}
    for r in reviews:
        if r.session is not None:
            out[r.session] = r.severity
    return out


def reviewed(
    path: Path, sessions: Iterable[str], outside_sessions: int, reviews: list[Review]
) -> bool:
    """A whole-log review read all of the segment; or it holds only session records and a
    review of each of those sessions read all of it."""
    if any(r.session is None and r.covers(path) for r in reviews):
        return True
    if outside_sessions:
        return False
    by_session: dict[str, list[Review]] = {}
    for r in reviews:
        if r.session is not None:
            by_session.setdefault(r.session, []).append(r)
    return all(any(r.covers(path) for r in by_session.get(s, [])) for s in sessions)
