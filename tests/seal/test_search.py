"""The seal search gives mapped pages back as it goes (record.find_seals): what it finds
is what a search of the same bytes in memory finds, wherever the steps fall."""

from __future__ import annotations

import mmap
import random
from pathlib import Path

import pytest

from mcpshim.log import execlog
from mcpshim.seal import record
from mcpshim.seal.record import MARKER


def test_seal_search_in_steps_finds_what_a_whole_search_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rnd = random.Random(5)
    parts = []
    for i in range(3000):
        if rnd.random() < 0.02:
            parts.append(MARKER + b"{not json" + b"\0\n")  # a seal record that does not parse
        elif rnd.random() < 0.01:
            parts.append(MARKER[: rnd.randrange(1, len(MARKER))])  # a torn marker
        else:
            parts.append(execlog.encode_record("exec", [b"x" * rnd.randrange(0, 3000), b"%d" % i]))
    parts.append(MARKER + b"cut short")
    data = b"".join(parts)
    path = tmp_path / "exec.log"
    path.write_bytes(data)
    whole = list(record.find_seals(data, 0, len(data)))
    assert len(whole) > 30
    for step in (mmap.PAGESIZE, 3 * mmap.PAGESIZE + 17, 1 << 20):
        monkeypatch.setattr(record, "_STEP", step)
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ) as mm:
            assert list(record.find_seals(mm, 0, len(data))) == whole
            assert list(record.find_seals(mm, 12345, len(data) - 999)) == list(
                record.find_seals(data, 12345, len(data) - 999)
            )
