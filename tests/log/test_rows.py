"""log.rows reads what execlog reads: the same records (rows made records again), the same
problems, on damaged logs (tests/fixtures/logfuzz) and on the edge cases of its fast path."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpshim.log import execlog, framing
from mcpshim.log.rows import ExecRows
from mcpshim.paths import Locations
from tests.fixtures.logfuzz import LogFuzzer

BOOT = b"aaaaaaaa-0000-4000-8000-000000000001"


def _same(loc: Locations, max_tails: int | None = None) -> int:
    """Both readers over the log at `loc`; the count of rows (fast path) read."""
    p1: list[execlog.LogProblem] = []
    p2: list[execlog.LogProblem] = []
    ref = list(execlog.iter_records(loc, p1))
    rows = ExecRows(max_tails=max_tails)
    got: list[execlog.Record] = []
    n = 0
    for item in rows.iter_log(loc, p2):
        if isinstance(item, tuple):
            n += 1
            got.append(rows.record(item))
        else:
            got.append(item)
    assert got == ref
    assert [r.where for r in got] == [r.where for r in ref]
    assert p2 == p1
    return n


def test_rows_read_damaged_logs_as_the_reader_does(tmp_path: Path) -> None:
    rows = 0
    for seed in range(60):
        log_dir = tmp_path / f"case{seed}" / "log"
        LogFuzzer(seed).write_case(log_dir)
        rows += _same(Locations(tmp_path / "no-shims", log_dir), max_tails=7 if seed % 2 else None)
    assert rows > 100  # the fast path was taken, not only the general one


def _exec(head: list[bytes], tail: list[bytes]) -> bytes:
    return execlog.encode_record("exec", [*head, *tail])


def test_rows_edge_cases(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    (log_dir / "boot").mkdir(parents=True)
    (log_dir / "boot" / BOOT.decode()).write_text("1700000000.25\n")
    path = b"/usr/bin:/bin"
    tail = [b"/w", b"git", b"/usr/bin/git", b"/s/git", b"S", path, b"", b"", b"1", b"log"]
    head = [b"1735689600", b"12.5", BOOT, b"10", b"1", b"100", b""]
    wide = b"9" * 19
    records = [
        _exec(head, tail),
        _exec([b"", b"12.5", *head[2:]], tail),  # the boot's time from boot/<id>
        _exec([b"x", b"-1", *head[2:]], tail),  # clocks no clock gives
        _exec([*head[:3], wide, *head[4:]], tail),  # a pid of 19 digits: general path
        _exec([*head[:4], wide, b" 7", b"+3"], tail),  # odd integers
        _exec([*head[:3], b"", *head[4:]], tail),  # no pid: refused
        _exec(head, [*tail[:8], b"2", b"log"]),  # argc wrong
        _exec(head, [*tail[:8], b"+1", b"log"]),  # argc int() takes
        _exec(head, tail[:8]),  # too short
        _exec(head, [b"?no-search", *tail[1:6], b"token,aws", b"sh -c x", b"0"]),
        _exec(head, [b"", *tail[1:4], "sé".encode(), b"\xff", *tail[6:]]),
        _exec(head[:5], []),  # far too short
        _exec(head, tail).replace(b"\0=log", b"\0log"),  # a stray NUL in the tail
        _exec(head, tail).replace(b"\0=12.5", b"\0\0=12.5"),  # a stray NUL in the head
        b"\0R\0=1\0=exec" + _exec(head, tail),  # torn before
        _exec(head, tail)[:-2],  # torn: no end marker, then the next record
        _exec(head, tail),
        _exec(head, tail),  # the same tail again (its cached index)
    ]
    (log_dir / "exec.log").write_bytes(b"".join(records))
    loc = Locations(tmp_path / "shims", log_dir)
    assert _same(loc) >= 6
    assert _same(loc, max_tails=1) >= 6


def _untabled(loc: Locations) -> tuple[list[execlog.Record], list[execlog.LogProblem]]:
    """Every piece decoded alone (`decode_piece` with no table of tails): the reference."""
    problems: list[execlog.LogProblem] = []
    out: list[execlog.Record] = []
    for p in execlog.segments(loc):
        with p.open("rb") as fh:
            for pos, piece in framing.pieces(fh, p.name, problems):
                rec = execlog.decode_piece(pos, piece, p.name, loc.spill_dir, problems)
                if rec is not None:
                    out.append(rec)
    return out, problems


@pytest.mark.parametrize("kept", [1, 3, 4096])
def test_the_table_of_tails_decodes_as_each_record_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: int
) -> None:
    """execlog's reader looks each exec record's tail up in a table (log.execfields), as
    log.rows does: the records and problems are those of each piece decoded on its own,
    whether the table holds every tail or starts again at each new one."""
    monkeypatch.setattr(execlog, "_TAILS_KEPT", kept)
    for seed in range(0, 60, 3):
        log_dir = tmp_path / f"case{seed}" / "log"
        LogFuzzer(seed).write_case(log_dir)
        loc = Locations(tmp_path / "no-shims", log_dir)
        problems: list[execlog.LogProblem] = []
        assert (list(execlog.iter_records(loc, problems)), problems) == _untabled(loc)
