"""base.flock, the one lock helper: flock(2) on a lock file that is never deleted, so it
agrees with flock(1) both ways, and a lock that stays held is an OSError (exit 2)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpshim.base.flock import FileLock, LockTimeoutError, open_lock, take


def _flock1(lock: Path, *command: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["flock", *command[:-1], str(lock), command[-1]], capture_output=True)


def test_flock1_waits_for_it_and_it_waits_for_flock1(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    with FileLock(lock, 0):
        # held here: flock(1) -n gives up at once (its status 1), -w 0.2 after a while
        assert _flock1(lock, "-n", "true").returncode == 1
        assert _flock1(lock, "-w", "0.2", "true").returncode == 1
    assert lock.exists()  # never deleted: the next taker locks the same file
    assert _flock1(lock, "-n", "true").returncode == 0
    done = tmp_path / "done"
    holder = subprocess.Popen(["flock", str(lock), "sh", "-c", f"sleep 0.5; : > {done}"])
    try:
        deadline = time.monotonic() + 10
        while _flock1(lock, "-n", "true").returncode == 0:  # until flock(1) holds it
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with pytest.raises(LockTimeoutError) as caught, FileLock(lock, 0.05):
            pass
        assert isinstance(caught.value, OSError) and caught.value.filename == str(lock)
        with FileLock(lock, 10):
            assert done.exists()  # taken only once flock(1)'s command was done
    finally:
        assert holder.wait() == 0


def test_the_lock_goes_with_its_holder(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    code = (
        "import sys, os; from mcpshim.base.flock import FileLock\n"
        f"l = FileLock({str(lock)!r}, 0); l.__enter__(); print('held', flush=True); os._exit(0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert out.stdout == b"held\n"
    with FileLock(lock, 0):  # a holder that died without letting go leaves no stale lock
        pass


def test_take_on_one_descriptor_is_not_reentrant_across_two(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    a, b = open_lock(lock), open_lock(lock)
    assert take(a, 0) and take(a, 0)  # the same open file takes it again
    assert not take(b, 0.05)  # another open file of this process waits like anyone
    assert oct(lock.stat().st_mode & 0o777) == "0o600"


def test_a_symlink_in_the_lock_files_place_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("")
    (tmp_path / "x.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        open_lock(tmp_path / "x.lock")
