"""One session's read (log.scope) gives exactly the whole log's answer.

Every command that reads one session (review, tree, log, report, approve, baseline save,
export otlp's traces) runs twice in this process, reading the session's part of the log
by the session index and reading the whole log, over seeded logs of interleaved sessions
(tests/fixtures/sessionlog.py): sessions that straddle rotations, damaged pieces, spilled
records, parents in other sessions; with the index up to date, behind the log (appended
to and rotated since), built piecemeal, damaged or gone.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from mcpshim.log import scope, sessionindex
from mcpshim.paths import Locations
from tests.fixtures import sealhelp
from tests.fixtures.home import Home
from tests.fixtures.scopecheck import both, scoped_reads
from tests.fixtures.sessionlog import SessionLog, rotate, write

SEEDS = range(12)


def _sessions(log: SessionLog) -> list[str]:
    """The log's sessions and one that is not there (a typo: the same error either way)."""
    return [*log.sessions, "S-none"]


def _assert_same(loc: Locations, sessions: list[str], files: Path) -> None:
    for sid in sessions:
        scoped, whole = both(loc, sid, files / sid)
        for a, b in zip(scoped, whole, strict=True):
            assert a == b, f"session {sid}: {str(a)[:3000]}\n!=\n{str(b)[:3000]}"


def _log(seed: int, loc: Locations, damage: float = 0.03) -> SessionLog:
    log = SessionLog(seed, damage=damage)
    recs = log.records(300)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(recs)), rng.randint(0, 3)))
    write(loc.log_dir, recs, cuts, log.spills)
    return log


@pytest.mark.parametrize("seed", SEEDS)
def test_every_session_reads_as_the_whole_log(home: Home, tmp_path: Path, seed: int) -> None:
    loc = home.loc
    log = _log(seed, loc)
    sessionindex.update(loc)
    assert scoped_reads(loc, log.sessions[0])
    _assert_same(loc, _sessions(log), tmp_path)


@pytest.mark.parametrize("seed", SEEDS[:6])
def test_an_index_behind_the_log(home: Home, tmp_path: Path, seed: int) -> None:
    """Indexed, then appended to, rotated and appended to again: the scoped read takes
    what the index has not read in full."""
    loc = home.loc
    log = SessionLog(seed)
    recs = log.records(300)
    a, b = len(recs) // 3, 2 * len(recs) // 3
    write(loc.log_dir, recs[:a], [a // 2], log.spills)
    sessionindex.update(loc)
    write(loc.log_dir, recs[a:b], [], log.spills)  # grown since
    _assert_same(loc, log.sessions[:3], tmp_path / "grown")
    sessionindex.update(loc)
    rotate(loc.log_dir)
    write(loc.log_dir, recs[b:], [], log.spills)  # rotated and a new live segment since
    _assert_same(loc, _sessions(log), tmp_path / "rotated")


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_an_index_built_piecemeal(home: Home, tmp_path: Path, seed: int) -> None:
    loc = home.loc
    log = _log(seed, loc)
    while True:
        path = sessionindex.index_path(loc)
        before = path.read_bytes() if path.exists() else b""
        sessionindex.update(loc, budget=4096)
        if path.read_bytes() == before:
            break
    _assert_same(loc, _sessions(log), tmp_path)


def test_a_damaged_or_missing_index(home: Home, tmp_path: Path) -> None:
    loc = home.loc
    log = _log(3, loc)
    sessionindex.update(loc)
    path = sessionindex.index_path(loc)
    good = path.read_bytes()
    for bad in (good[: len(good) // 2], good.replace(b'"spans"', b'"spanz"', 1),
                good.replace(b'"offset":', b'"offset":-', 1), b"{}"):  # fmt: skip
        path.write_bytes(bad)
        _assert_same(loc, log.sessions[:2], tmp_path / str(len(bad)))
    path.unlink()
    _assert_same(loc, log.sessions[:2], tmp_path / "gone")


def test_a_segment_dropped_or_rewritten_since(home: Home, tmp_path: Path) -> None:
    loc = home.loc
    log = SessionLog(5)
    recs = log.records(300)
    write(loc.log_dir, recs, [100, 200], log.spills)
    sessionindex.update(loc)
    oldest = sorted(loc.log_dir.glob("exec.log.0*"))[0]
    oldest.unlink()  # retention dropped it
    _assert_same(loc, _sessions(log), tmp_path / "dropped")
    live = loc.log_dir / "exec.log"
    data = live.read_bytes()
    live.write_bytes(data[: len(data) // 2])  # cut short (a new file in its place)
    os.utime(live)
    _assert_same(loc, log.sessions, tmp_path / "cut")


def test_the_read_is_the_sessions_part(home: Home) -> None:
    """What the scoped read reads: far less than the log for one of many sessions."""
    loc = home.loc
    log = SessionLog(7, sessions=10, damage=0.0)
    write(loc.log_dir, log.records(6000, overlap=False), [7000, 14000], log.spills)
    sc = scope.scope(loc, log.sessions[4])
    assert sc is not None
    spans = [entry["spans"].get(sc.session, []) for entry in sc.entries]
    read = sum(sum(s[1::2]) - sum(s[::2]) for s in spans)
    total = sum(p.stat().st_size for p in loc.log_dir.glob("exec.log*"))
    assert 0 < read < total / 5


def test_a_sealed_log_and_one_whose_seals_were_cut_out(
    home: Home, tmp_path: Path, seal_templates: sealhelp.Templates
) -> None:
    """The `sealed:` line and the marks: as the whole log's verification says, also when
    every seal record was removed (the sealer's state still there)."""
    loc = home.loc
    sealhelp.sealed_log(home, seal_templates, rounds=3, rotate=True)
    sessionindex.update(loc)
    _assert_same(loc, ["r1", "r3"], tmp_path / "sealed")
    for seg in loc.log_dir.glob("exec.log*"):
        kept = [raw for _, raw in sealhelp.records(seg) if b"\0=seal\0=" not in raw]
        seg.write_bytes(b"".join(kept))
    sessionindex.update(loc)
    assert not scope.scope(loc, "r3").sealed  # type: ignore[union-attr]
    _assert_same(loc, ["r3"], tmp_path / "cut")
