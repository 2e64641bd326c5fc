"""EventLog: mcpshim's own records appended under the log's lock, with the lock file and
the log kept open, following rotation, and never sharing a lock across a fork."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpshim.base.flock import FileLock, LockTimeoutError
from mcpshim.log import eventlog
from mcpshim.log.execlog import EventRecord, LogProblem, read_stream
from mcpshim.log.rotation import rotate
from mcpshim.paths import Locations


def _loc(tmp_path: Path) -> Locations:
    return Locations(tmp_path / "shims", tmp_path / "log")


def _notes(path: Path) -> list[int]:
    out = []
    problems: list[LogProblem] = []
    with path.open("rb") as stream:
        for rec in read_stream(stream, path.name, None, problems):
            assert isinstance(rec, EventRecord)
            out.append(rec.data["n"])
    assert problems == []
    return out


def test_appends_follow_rotation(tmp_path: Path) -> None:
    loc = _loc(tmp_path)
    log = eventlog.EventLog(loc)
    log.append("note", {"n": 1})
    rotated, _ = rotate(loc)
    assert rotated is not None
    log.append("note", {"n": 2})  # its open log was renamed away: it writes the new one
    assert _notes(rotated) == [1]
    assert _notes(loc.log_file) == [2]
    assert oct(loc.log_file.stat().st_mode & 0o777) == "0o600"


def test_it_waits_for_the_lock_and_gives_up_after_its_timeout(tmp_path: Path) -> None:
    loc = _loc(tmp_path)
    loc.log_dir.mkdir(parents=True)
    done = tmp_path / "done"  # written by flock(1)'s command just before it lets go
    holder = subprocess.Popen(["flock", str(loc.lock_file), "sh", "-c", f"sleep 1; : > {done}"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until flock(1) holds it
            try:
                with FileLock(loc.lock_file, 0):
                    time.sleep(0.01)
            except LockTimeoutError:
                break
        with pytest.raises(LockTimeoutError):
            eventlog.EventLog(loc, timeout=0.2).append("note", {"n": 1})
        eventlog.EventLog(loc, timeout=10).append("note", {"n": 2})
        assert done.exists()  # it waited for flock(1) to let go
    finally:
        holder.wait()
    assert _notes(loc.log_file) == [2]


def test_a_forked_child_takes_the_lock_on_its_own(tmp_path: Path) -> None:
    loc = _loc(tmp_path)
    log = eventlog.EventLog(loc)
    log.append("note", {"n": 1})
    # The parent holds the lock through its own open lock file. A child sharing that open
    # file would be granted the lock at once; one that opened its own must wait.
    fcntl.flock(log._lock_fd, fcntl.LOCK_EX)
    log.timeout = 0.2
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            log.append("note", {"n": 2})
        except LockTimeoutError:
            os._exit(7)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 7
    fcntl.flock(log._lock_fd, fcntl.LOCK_UN)
    log.append("note", {"n": 3})
    assert _notes(loc.log_file) == [1, 3]


def test_only_event_kinds_are_written(tmp_path: Path) -> None:
    for kind in ("exec", "bad kind", ""):
        with pytest.raises(ValueError):
            eventlog.append_event(_loc(tmp_path), kind, {})


def test_the_log_lock_is_flock_on_the_lock_file(tmp_path: Path) -> None:
    """log_lock (rotation, retention, sealing) takes the lock flock(1) takes, and gives up
    after its timeout with LockTimeoutError."""
    loc = _loc(tmp_path)
    with eventlog.log_lock(loc):
        assert subprocess.run(["flock", "-n", str(loc.lock_file), "true"]).returncode == 1
        with pytest.raises(LockTimeoutError), eventlog.log_lock(loc, timeout=0.05):
            pass
    assert subprocess.run(["flock", "-n", str(loc.lock_file), "true"]).returncode == 0
    assert oct(loc.lock_file.stat().st_mode & 0o777) == "0o600"


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_many_records_go_in_order_in_few_writes(tmp_path: Path) -> None:
    """A trace's records at a session's end (issue 42's stop): one lock and one write()
    for the lot, where each record took its own."""
    loc = _loc(tmp_path)
    code = (
        "import sys; from pathlib import Path; from mcpshim.log import eventlog;"
        "from mcpshim.paths import Locations;"
        "loc = Locations(Path(sys.argv[1]) / 'shims', Path(sys.argv[1]) / 'log');"
        "eventlog.append_event(loc, 'note', {'n': -1});"  # opens the log: not counted
        "print(eventlog.append_events(loc, (('note', {'n': i}) for i in range(500))))"
    )
    out = tmp_path / "strace.out"
    done = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=write,flock", "-o", str(out), sys.executable,
         "-c", code, str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == "500"
    calls = [line for line in out.read_text().splitlines() if "note" in line or "flock" in line]
    assert sum("LOCK_EX" in c for c in calls) == 2, calls  # the first record's, the lot's
    assert sum("write(" in c for c in calls) == 2, calls
    assert _notes(loc.log_file) == [-1, *range(500)]


def test_a_batch_is_cut_into_writes_of_whole_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loc = _loc(tmp_path)
    monkeypatch.setattr(eventlog, "_BATCH_BYTES", 100)  # a few records a write()
    log = eventlog.EventLog(loc)
    assert log.append_many(("note", {"n": i, "pad": "x" * (i % 7)}) for i in range(50)) == 50
    with pytest.raises(ValueError, match="not an event kind"):
        log.append_many([("note", {"n": 50}), ("note", {"n": 51}), ("exec", {"n": 52})])
    assert _notes(loc.log_file) == list(range(52))  # those before the bad one are written
