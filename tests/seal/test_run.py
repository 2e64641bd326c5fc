"""Who seals and where anchors go: `mcpshim run` seals as the session goes (at most about
a second behind) and at its end; `log seal` leaves a running sealer be; anchors go to a
real rsyslogd through logger, and a missing system log is said once."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.home import Home
from tests.fixtures.sealhelp import (
    MCPSHIM,
    Templates,
    cli,
    exec_with,
    kinds,
    seal,
    sealed_log,
    seals_in,
    shim_execs,
    state_path,
    verify,
)


def _follower_holds_lock(home: Home) -> bool:
    fd = os.open(str(state_path(home)) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _until(check: object, timeout: float = 30.0) -> float:
    t0 = time.monotonic()
    while not check():  # type: ignore[operator]
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(0.02)
    return time.monotonic() - t0


def _run(home: Home, *command: str) -> subprocess.Popen[str]:
    loc = ["--dir", str(home.loc.shim_dir), "--log-dir", str(home.loc.log_dir)]
    return subprocess.Popen(
        [*MCPSHIM, "run", *loc, "--", *command],
        env=home.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_run_seals_as_it_goes_and_at_exit(home: Home, seal_templates: Templates) -> None:
    verifier = sealed_log(home, seal_templates, rounds=1)
    before = max(seals_in(home.loc.log_file))
    run = _run(home, "sleep", "60")
    try:
        _until(lambda: _follower_holds_lock(home))
        assert seal(home).startswith("another sealer")  # cron's seal leaves it be
        shim_execs(home, "during", "while-running")
        off, _ = exec_with(home.loc.log_file, b"while-running")

        def sealed() -> bool:
            return any(s.end > off for s in seals_in(home.loc.log_file).values())

        # Sealed while the session runs, not only at its end (sleep 60). How far behind (1 s
        # and the follower's work) is measured by benchmarks/seal_cost.py, not here: the
        # bound only has to be far below the session's length, on a loaded machine.
        assert _until(sealed) < 20
    finally:
        run.send_signal(signal.SIGTERM)  # forwarded to sleep: the session ends
        _, err = run.communicate(timeout=60)
    assert run.returncode == 128 + signal.SIGTERM, err
    rc, doc = verify(home, "--key", verifier)
    assert rc == 0, doc["problems"]
    assert doc["window"]["unsealed_records"] == 0  # session-end too: sealed at exit
    assert doc["seals"] >= before + 2
    assert not _follower_holds_lock(home)


def test_two_runs_on_one_log_seal_one_chain(home: Home, seal_templates: Templates) -> None:
    verifier = sealed_log(home, seal_templates, rounds=1)
    shim = str(home.loc.shim_dir / "true")
    runs = [_run(home, "sh", "-c", f"{shim} a{i}; sleep 2; {shim} b{i}") for i in range(2)]
    for r in runs:
        _, err = r.communicate(timeout=120)
        assert r.returncode == 0, err
    rc, doc = verify(home, "--key", verifier)
    assert rc == 0, doc["problems"]
    assert doc["window"]["unsealed_records"] == 0


def test_a_run_on_a_log_not_sealed_starts_no_sealer(home: Home) -> None:
    out = _run(home, "true")
    _, err = out.communicate(timeout=60)
    assert out.returncode == 0, err
    assert not state_path(home).exists()  # nothing was sealed, nothing was set up to be


@pytest.fixture
def rsyslogd() -> Iterator[tuple[Path, Path]]:
    """A real rsyslogd of the test's own: a unix socket and the file it keeps messages in."""
    exe = shutil.which("rsyslogd") or (
        "/usr/sbin/rsyslogd" if Path("/usr/sbin/rsyslogd").exists() else None
    )
    if exe is None or shutil.which("logger") is None:
        pytest.skip("rsyslogd or logger not installed (scripts/system-deps.sh)")
    d = Path(tempfile.mkdtemp(prefix="rsl-"))  # short: a unix socket path has 108 bytes
    sock, kept = d / "log.sock", d / "messages"
    (d / "rsyslog.conf").write_text(
        f'global(workDirectory="{d}")\n'
        'module(load="imuxsock" SysSock.Use="off")\n'
        f'input(type="imuxsock" Socket="{sock}")\n'
        f'*.* action(type="omfile" file="{kept}")\n'
    )
    proc = subprocess.Popen(
        [exe, "-n", "-f", str(d / "rsyslog.conf"), "-i", str(d / "pid")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _until(sock.exists, 30)
        yield sock, kept
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(d, ignore_errors=True)


def _anchors_in(kept: Path, count: int) -> None:
    _until(lambda: kept.exists() and kept.read_text().count("mcpshim_seal") >= count, 30)


def test_anchors_go_to_a_real_syslog_and_catch_a_cut_tail(
    home: Home, rsyslogd: tuple[Path, Path]
) -> None:
    sock, kept = rsyslogd
    from tests.fixtures.home import dash_path, install

    install(home, ["true"], dash_path())
    shim_execs(home, "s1", "one")
    out = cli(home, "log", "seal", "--init", "--period", "1", "--syslog-socket", str(sock))
    assert out.returncode == 0, out.stderr
    assert "not anchored" not in out.stderr
    shim_execs(home, "s2", "two", "three")
    seal(home)
    _anchors_in(kept, 2)
    listed = cli(home, "log", "anchors", "--from", str(kept), "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert '"n": 1' in listed.stdout and "mcpshim-seal" in kept.read_text()
    rc, doc = verify(home, "--anchors", str(kept))
    assert rc == 0 and doc["anchors"] == {"checked": 2, "through": 1}
    # the agent cuts the tail and removes the sealer's state: the syslog still names seal 1
    off, _ = exec_with(home.loc.log_file, b"two")
    os.truncate(home.loc.log_file, off)
    state_path(home).unlink()
    assert verify(home)[0] == 0
    rc, doc = verify(home, "--anchors", str(kept))
    assert rc == 1 and kinds(doc) == {"truncated"}


def test_no_system_log_is_said_once(home: Home, rsyslogd: tuple[Path, Path]) -> None:
    sock, _ = rsyslogd
    gone = sock.parent / "nobody-listens"  # what a container without a system log has
    from tests.fixtures.home import dash_path, install

    install(home, ["true"], dash_path())
    shim_execs(home, "s1", "one")
    out = cli(home, "log", "seal", "--init", "--period", "1", "--syslog-socket", str(gone))
    assert out.returncode == 0
    assert f"there is no {gone}: no system log runs here" in out.stderr
    assert "--anchor-cmd" in out.stderr
    shim_execs(home, "s1", "two")
    again = seal(home)
    assert "no system log" not in again and "sealed" in again
    # logger itself would have exited 0 and kept nothing
    assert subprocess.run(["logger", "-u", str(gone), "x"]).returncode == 0
