"""Concurrent shims never tear or interleave records, and rotation under load loses none."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from mcpshim.log import execlog, rotation
from tests.fixtures.home import Home, install

WRITERS = 8
EXECS = 500

LOOP = r"""
shim=$1 w=$2 n=$3
big8=$(printf "%08192d" 0 | tr 0 e)
big64=$(printf "%065536d" 0 | tr 0 f)
i=0
while [ "$i" -lt "$n" ]; do
	if [ $((i % 25)) -eq 3 ]; then "$shim" "w$w" "i$i" "$big64"
	elif [ $((i % 10)) -eq 1 ]; then "$shim" "w$w" "i$i" "$big8"
	else "$shim" "w$w" "i$i" "a b
c"
	fi
	i=$((i + 1))
done
"""


def _start_writers(home: Home) -> list[subprocess.Popen[bytes]]:
    shim = str(home.loc.shim_dir / "true")
    return [
        subprocess.Popen(["/bin/sh", "-c", LOOP, "loop", shim, str(w), str(EXECS)], env=home.env)
        for w in range(WRITERS)
    ]


def _check(home: Home) -> None:
    problems: list[execlog.LogProblem] = []
    recs = [
        r for r in execlog.iter_records(home.loc, problems) if isinstance(r, execlog.ExecRecord)
    ]
    assert problems == []
    assert len(recs) == WRITERS * EXECS
    seen = set()
    for r in recs:
        w, i = r.args[0].decode(), r.args[1].decode()
        n = int(i[1:])
        if n % 25 == 3:
            assert r.args[2] == b"f" * 65536
        elif n % 10 == 1:
            assert r.args[2] == b"e" * 8192
        else:
            assert r.args[2] == b"a b\nc"
        seen.add((w, i))
    assert len(seen) == WRITERS * EXECS


@pytest.mark.timeout(600)
def test_eight_writers_lose_and_tear_nothing(home: Home, interpreter: str) -> None:
    install(home, ["true"], interpreter)
    procs = _start_writers(home)
    assert [p.wait(timeout=500) for p in procs] == [0] * WRITERS
    _check(home)


@pytest.mark.timeout(600)
def test_twenty_rotations_under_load_lose_nothing(home: Home) -> None:
    from tests.fixtures.home import dash_path

    install(home, ["true"], dash_path())
    procs = _start_writers(home)
    rotated: list[object] = []

    def rotate() -> None:
        for _ in range(20):
            time.sleep(0.15)
            new, _removed = rotation.rotate(home.loc)
            rotated.append(new)

    t = threading.Thread(target=rotate)
    t.start()
    assert [p.wait(timeout=500) for p in procs] == [0] * WRITERS
    t.join()
    assert len(rotated) == 20 and all(rotated)
    assert len(execlog.segments(home.loc)) == 21
    _check(home)
