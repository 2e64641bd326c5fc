"""No raw trace output outlives the process that reads it (issue 28 item 6): a traced `run`
killed by SIGKILL leaves the traced command's arguments nowhere on disk, the next traced
session sweeps what the dead one left, and survivors' later execs are recorded, redacted,
by the drain once they are gone, with nothing left behind."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from subprocess import DEVNULL

from mcpshim.trace.store import nameless_file, sweep
from tests.fixtures.home import Home
from tests.fixtures.runhelp import (
    events,
    kill_all,
    needs_trace,
    only_session,
    poll,
    run,
    run_argv,
    session_pids,
)

TOKEN = "ghp_" + "K1l2M3n4" * 5


def _encodings(secret: str) -> list[bytes]:
    """The secret as strace prints it (-xx: every byte \\xHH) and as it was given."""
    raw = secret.encode()
    return [raw, "".join(f"\\x{b:02x}" for b in raw).encode(), raw.hex().encode()]


def _files_holding(root: Path, secret: str) -> list[str]:
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if path.is_fifo() or path.is_symlink():
                continue
            data = path.read_bytes()
            if any(e in data for e in _encodings(secret)):
                out.append(str(path))
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@needs_trace
def test_a_killed_traced_session_keeps_its_trace_and_leaves_no_trace_output(
    home: Home, tmp_path: Path
) -> None:
    line = f"/bin/true --token={TOKEN} {TOKEN}; /bin/true second; exec sleep 60"
    argv = run_argv(home, ["/bin/sh", "-c", line], "--trace", "--grace", "1")
    err = (tmp_path / "stderr").open("wb")
    proc = subprocess.Popen(argv, env=home.env, stdin=DEVNULL, stdout=DEVNULL, stderr=err)
    sid = ""
    try:
        poll(lambda: home.loc.log_file.exists() and events(home, "session-start"), "start")
        sid = only_session(home)

        def sleeping() -> list[int] | None:
            pids = session_pids(sid)
            return pids if b"sleep\x0060\x00" in [_cmdline(p) for p in pids] else None

        family = poll(sleeping, "the traced command to reach its sleep")
        proc.kill()  # SIGKILL: nothing of the supervisor's runs any more
        proc.wait(timeout=60)
        poll(lambda: not (set(family) & set(session_pids(sid))), "the watcher to end it", 30)
        # Issue 41 item 8: what was traced up to the kill is kept (the watcher held the
        # FIFO and the nameless output; before, all was lost), redacted like any trace,
        # the session marked killed, and strace's "Broken pipe" lines (211 of them before)
        # never reach the client's stderr.
        [summary] = poll(lambda: events(home, "trace-summary", sid), "the trace's summary")
        assert summary["killed"] is True and summary["complete"] is True
        traced = [e["argv"] for e in events(home, "trace-exec", sid)]
        assert ["/bin/true", "second"] in traced
        assert any(a[0] == "/bin/true" and "[REDACTED" in a[1] for a in traced), traced
        [end] = events(home, "session-end", sid)
        assert end["cause"] == "supervisor-lost"
        err.close()
        said = (tmp_path / "stderr").read_bytes()
        assert b"Broken pipe" not in said and b"strace" not in said, said
        # The trace had the token (strace prints every argument); the disk never does.
        assert _files_holding(home.root, TOKEN) == []
        trace_dir = home.loc.log_dir / "trace"
        assert list(trace_dir.iterdir()) == []  # the watcher took its directory too
        done = run(home, ["/bin/true"], "--trace", stdout=DEVNULL, stderr=DEVNULL)
        assert done.returncode == 0
        assert list(trace_dir.iterdir()) == []
    finally:
        err.close()
        proc.kill()
        kill_all(session_pids(sid) if sid else [])


def test_sweep_keeps_a_live_sessions_directory_and_removes_the_rest(tmp_path: Path) -> None:
    import fcntl

    live, dead, old = (tmp_path / f"run-{n}" for n in ("live", "dead", "old"))
    for d in (live, dead, old):
        d.mkdir()
    (old / "strace.out").write_bytes(b'123 1.0 execve("/bin/true", ["x"], ...) = 0\n')
    fd = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert sorted(sweep(tmp_path)) == ["run-dead", "run-old"]
        assert live.is_dir() and not dead.exists() and not old.exists()
        # a directory being made (`new-*`) is not swept; one abandoned a minute ago is
        young, stale = tmp_path / "new-young", tmp_path / "new-stale"
        young.mkdir()
        stale.mkdir()
        os.utime(stale, (time.time() - 120, time.time() - 120))
        assert sweep(tmp_path) == ["new-stale"]
        assert young.is_dir() and not stale.exists()
        young.rmdir()
    finally:
        os.close(fd)
    # the output file has no name: nothing in the directory, its bytes all the same
    out = nameless_file(live)
    os.write(out, b"line\n")
    assert os.listdir(live) == []
    assert Path(f"/proc/self/fd/{out}").read_bytes() == b"line\n"
    os.close(out)


@needs_trace
def test_survivors_later_execs_are_recorded_late_and_leave_nothing(
    home: Home, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    survivor = f"until [ -e {go} ]; do sleep 0.05; done; /bin/true --token={TOKEN} late"
    line = f'/bin/sh -c "{survivor}" & exit 0'
    proc = run(home, ["/bin/sh", "-c", line], "--trace", stdout=DEVNULL, stderr=DEVNULL)
    assert proc.returncode == 0
    sid = only_session(home)
    [summary] = events(home, "trace-summary", sid)
    assert summary["complete"] is False and "late" in summary["note"]
    go.touch()  # the survivor runs its last command, then ends; the tracer with it

    def late() -> list[dict[str, object]]:
        return [e for e in events(home, "trace-exec", sid) if e.get("late")]

    [rec] = poll(lambda: [e for e in late() if e["filename"] == "/bin/true"], "the late exec")
    assert rec["argv"] == ["/bin/true", "--token=[REDACTED:option-value]", "late"]
    assert rec["argv_redacted"] == ["option-value"]
    # once: nothing the session recorded is recorded again
    keys = [(e["pid"], e["time"]) for e in events(home, "trace-exec", sid)]
    assert len(keys) == len(set(keys))
    poll(lambda: not list((home.loc.log_dir / "trace").iterdir()) or None, "no trace dir", 30)
    assert _files_holding(home.root, TOKEN) == []


def test_runs_starting_together_never_sweep_each_other_s_directory(tmp_path: Path) -> None:
    """A session's directory is locked before it is a `run-*` one: sweeps running all the
    while (another run starting) never remove one, and each stays locked until closed.
    (Two runs on one log lost a directory between its mkdtemp and its lock.)"""
    import threading

    from mcpshim.trace.tracedir import new_locked_dir

    stop = threading.Event()
    swept: list[str] = []

    def sweeper() -> None:
        while not stop.is_set():
            swept.extend(sweep(tmp_path))

    threads = [threading.Thread(target=sweeper) for _ in range(2)]
    for t in threads:
        t.start()
    made = []
    try:
        for _ in range(300):
            d, fd = new_locked_dir(tmp_path)
            made.append((d, fd))
            assert os.path.isdir(d) and os.path.basename(d).startswith("run-")
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert swept == []  # every one was held from its making on
    for _d, fd in made:
        os.close(fd)
    assert sorted(sweep(tmp_path)) == sorted(os.path.basename(d) for d, _fd in made)
