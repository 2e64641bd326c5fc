"""A broken machine: a full disk, a read-only log, an unusable lock, a log dir deleted
mid-run, a log nobody may read. Each is one clear line; `run` still exits with its
command's status, everything else with 2. Never a traceback.

The tests run as root (CI does), so mode 000 stops nothing: a full or read-only disk is a
small tmpfs (mounted here, unmounted in teardown), a read-only file is a read-only bind
mount, an unusable lock file is a directory in its place, and an unreadable log is read by
`nobody` through setpriv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpshim.trace.probe import trace_unavailable
from tests.fixtures.disk import fill, mount, small_tmpfs
from tests.fixtures.home import SRC, Home

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def cli(home: Home, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPSHIM, *args], env=home.env, input=stdin, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, unmounted afterwards (with whatever was bind-mounted inside)."""
    with small_tmpfs(tmp_path) as d:
        yield d


def _no_traceback(out: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in out.stderr, out.stderr


def _one_line(out: subprocess.CompletedProcess[str], prefix: str, *words: str) -> None:
    _no_traceback(out)
    hits = [line for line in out.stderr.splitlines() if line.startswith(prefix)]
    assert len(hits) == 1, out.stderr
    for w in words:
        assert w in hits[0], hits[0]


def _run(home: Home, log_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli(home, "run", *extra, "--log-dir", str(log_dir), "--", "sh", "-c", "echo ran; exit 7")


@pytest.mark.parametrize("mcp", [False, True], ids=["run", "run-mcp"])
def test_run_on_a_full_disk_keeps_the_commands_status(home: Home, tmpfs: Path, mcp: bool) -> None:
    log_dir = tmpfs / "log"
    log_dir.mkdir()
    fill(tmpfs)
    out = _run(home, log_dir, *(["--mcp"] if mcp else []))
    assert out.returncode == 7, out.stderr
    if not mcp:
        assert out.stdout == "ran\n"
    _one_line(out, "mcpshim: warning: cannot write the exec log", "No space left on device")


@pytest.mark.skipif(trace_unavailable(None)[0] is None, reason="needs strace allowed here")
def test_run_traced_with_a_full_trace_dir_keeps_going(
    home: Home, tmp_path: Path, tmpfs: Path
) -> None:
    # The exec log has room, the trace's directory has none: the trace stops being stored,
    # never the session (nor the draining of strace's FIFO), and the coverage line says so.
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    (log_dir / "trace").symlink_to(tmpfs)
    fill(tmpfs)
    out = cli(
        home, "run", "--log-dir", str(log_dir), "--", "sh", "-c", "/bin/true; echo ran; exit 7"
    )
    assert out.returncode == 7, out.stderr
    assert out.stdout == "ran\n"
    _no_traceback(out)
    assert os.listdir(tmpfs) == ["filler"]  # no raw trace left behind
    review = cli(home, "review", "--log-dir", str(log_dir), "--format", "json")
    [cov] = json.loads(review.stdout)["coverage"]
    assert cov["trace"]["status"] == "lost"
    assert "could not be stored: No space left on device" in cov["line"]


def test_install_on_a_full_disk(home: Home, tmpfs: Path) -> None:
    fill(tmpfs)
    out = cli(home, "install", "--dir", str(tmpfs / "shims"), "--log-dir", str(tmpfs / "log"))
    assert out.returncode == 2
    _one_line(out, "mcpshim: error: cannot install shims", "No space left on device")
    left = [p.name for p in tmpfs.rglob("*.tmp")]
    assert left == []  # no half-written temporary file stays behind


def test_read_only_log_dir_in_run_and_rotate(home: Home, tmpfs: Path) -> None:
    log_dir = tmpfs / "log"
    log_dir.mkdir()
    (log_dir / "exec.log").write_bytes(b"")
    (log_dir / "exec.log.lock").write_bytes(b"")
    mount("-o", "remount,ro", str(tmpfs))
    out = _run(home, log_dir)
    assert out.returncode == 7
    _one_line(out, "mcpshim: warning: cannot write the exec log", "Read-only file system")
    out = cli(home, "log", "--log-dir", str(log_dir), "rotate")
    assert out.returncode == 2
    _one_line(out, "mcpshim: error:", "exec.log.lock", "Read-only file system")


def test_read_only_exec_log_in_run_and_rotate(home: Home, tmp_path: Path, tmpfs: Path) -> None:
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    log = log_dir / "exec.log"
    log.write_bytes(b"\0R\0=1\0=note\0={}\0\n")
    mount("--bind", str(log), str(log))
    mount("-o", "remount,bind,ro", str(log))
    try:
        out = _run(home, log_dir)
        assert out.returncode == 7
        _one_line(out, "mcpshim: warning: cannot write the exec log", "exec.log")
        out = cli(home, "log", "--log-dir", str(log_dir), "rotate")
        assert out.returncode == 2
        _one_line(out, "mcpshim: error:", "exec.log")
    finally:
        subprocess.run(["umount", "-l", str(log)], check=False)


def test_unusable_lock_file_in_run_and_rotate(home: Home, tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    (log_dir / "exec.log").write_bytes(b"\0R\0=1\0=note\0={}\0\n")
    (log_dir / "exec.log.lock").mkdir()  # root opens a mode-000 file; not a directory
    out = _run(home, log_dir)
    assert out.returncode == 7
    _one_line(out, "mcpshim: warning: cannot write the exec log", "exec.log.lock")
    out = cli(home, "log", "--log-dir", str(log_dir), "rotate")
    assert out.returncode == 2
    _one_line(out, "mcpshim: error:", "exec.log.lock", "Is a directory")


def test_log_dir_deleted_mid_run(home: Home, tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    (log_dir / "exec.log").write_bytes(b"")
    # once session-start is written (the command starts before it: supervise.launch)
    log = log_dir / "exec.log"
    script = f"until grep -qa session-start '{log}'; do sleep 0.02; done; rm -rf '{log_dir}'; "
    script += "sleep 0.3; exit 9"
    out = cli(home, "run", "--log-dir", str(log_dir), "--sample-ms", "20", "--", "sh", "-c", script)
    assert out.returncode == 9, out.stderr
    _one_line(out, "mcpshim: warning: cannot write the exec log", "No such file or directory")


def test_a_log_nobody_may_read(home: Home) -> None:
    """A real mode-000 exec.log, read by an unprivileged user: exit 2, not 1 (findings)."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv(1) to read as nobody")
    root = Path(tempfile.mkdtemp(prefix="mcpshim-nobody-"))
    try:
        root.chmod(0o755)
        log_dir = root / "log"
        log_dir.mkdir()
        (log_dir / "exec.log").write_bytes(b"\0R\0=1\0=note\0={}\0\n")
        (log_dir / "exec.log").chmod(0o000)
        src = str(SRC)
        env = {"PATH": os.environ["PATH"], "HOME": str(root), "PYTHONPATH": src}
        for args in (["log"], ["tree"], ["review"], ["report", "-o", "-"]):
            out = subprocess.run(
                [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                 sys.executable, "-m", "mcpshim", *args, "--dir", str(root / "shims"),
                 "--log-dir", str(log_dir)],
                env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            if "No module named" in out.stderr:
                pytest.skip(f"nobody cannot import mcpshim here: {out.stderr.strip()[-200:]}")
            assert out.returncode == 2, (args, out.stderr)
            _one_line(out, "mcpshim: error:", "exec.log", "Permission denied")
    finally:
        shutil.rmtree(root, ignore_errors=True)
