"""What the shim cannot know is recorded as unknown, with why; what it cannot read safely is
refused, never waited on.

A cwd that was deleted, or that the process may not search, has no path: it was recorded as
'' (dash) or '.' (bash), which every view then showed as a real, empty directory.
A log file replaced by a FIFO made `mcpshim log` wait for a writer for ever.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcpshim.log import execlog
from tests.fixtures.home import Home, dash_path, install

MCPSHIM = [sys.executable, "-m", "mcpshim"]
NOBODY = 65534


def cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPSHIM, *args], env=home.env, capture_output=True, text=True, timeout=60
    )


def test_a_deleted_cwd_is_recorded_as_unknown_and_shown_so(
    home: Home, interpreter: str, tmp_path: Path
) -> None:
    install(home, ["true"], interpreter)
    gone = tmp_path / "gone"
    gone.mkdir()

    def inside_then_delete() -> None:
        os.chdir(gone)
        os.rmdir(gone)

    subprocess.run(
        [str(home.loc.shim_dir / "true"), "arg"],
        env=home.env,
        preexec_fn=inside_then_delete,
        check=True,
        capture_output=True,
    )
    [rec] = home.execs()
    assert rec.cwd == b""
    assert rec.cwd_unknown.startswith("not resolvable")
    text = cli(home, "log")
    assert text.returncode == 0 and "?(not resolvable" in text.stdout
    [doc] = [json.loads(line) for line in cli(home, "log", "--format", "json").stdout.splitlines()]
    assert doc["cwd"] is None and doc["cwd_unknown"].startswith("not resolvable")
    ecs = json.loads(cli(home, "log", "--format", "ecs").stdout)
    assert "working_directory" not in ecs["process"]
    tree = cli(home, "tree")
    assert tree.returncode == 0 and "cwd ?(not resolvable" in tree.stdout


def test_an_unsearchable_cwd_is_recorded_as_unknown(home: Home, tmp_path: Path) -> None:
    """As uid 65534 in a mode-000 directory (root searches anything, so the test drops to
    nobody; the shim, its library and its log are nobody's for the run)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run a shim as another user")
    from mcpshim.paths import Locations
    from mcpshim.shim import install as shim_install

    top = Path(tmp_path / "world")
    top.mkdir()
    loc = Locations(top / "shims", top / "log")
    shim_install.install(loc, ["true"], {}, interpreter=dash_path())
    for p in [top, *top.rglob("*")]:
        os.chown(p, NOBODY, NOBODY, follow_symlinks=False)
    for p in (tmp_path, *tmp_path.parents):  # up to the first directory nobody may search
        if p.stat().st_mode & 0o001:
            break
        p.chmod(p.stat().st_mode | 0o711)
    closed = top / "closed"
    closed.mkdir(mode=0o000)
    os.chown(closed, NOBODY, NOBODY)
    closed.chmod(0o000)

    def become_nobody() -> None:
        os.chdir(closed)
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    out = subprocess.run(
        [str(loc.shim_dir / "true")],
        env={"PATH": "/usr/bin:/bin"},
        preexec_fn=become_nobody,
        capture_output=True,
    )
    assert (out.returncode, out.stderr) == (0, b"")
    problems: list[execlog.LogProblem] = []
    [rec] = list(execlog.iter_records(loc, problems))
    assert isinstance(rec, execlog.ExecRecord)
    assert (rec.cwd, rec.cwd_unknown) == (b"", "not searchable by the process")


def test_a_fifo_log_is_refused_by_the_reader_not_waited_on(home: Home) -> None:
    install(home, ["true"], dash_path())
    subprocess.run([str(home.loc.shim_dir / "true")], env=home.env, check=True)
    home.loc.log_file.rename(home.loc.log_dir / "exec.log.000001")
    os.mkfifo(home.loc.log_file)
    for cmd in (["log"], ["tree"], ["review"]):
        out = cli(home, *cmd)
        assert out.returncode == 2, (cmd, out.stderr)
        assert "exec.log is not a regular file" in out.stderr
        assert "Traceback" not in out.stderr


def test_a_fifo_spill_file_or_anchor_is_skipped_not_waited_on(home: Home) -> None:
    install(home, ["true"], dash_path())
    subprocess.run([str(home.loc.shim_dir / "true"), "x" * 6000], env=home.env, check=True)
    [spill] = list(home.loc.spill_dir.iterdir())
    spill.unlink()
    os.mkfifo(spill)
    for anchor in home.loc.boot_dir.iterdir():
        anchor.unlink()
        os.mkfifo(anchor)
    out = cli(home, "log")
    assert out.returncode == 0, out.stderr
    assert "not a regular file" in out.stderr


def test_install_and_uninstall_do_not_wait_on_a_fifo_in_the_shim_dir(home: Home) -> None:
    home.loc.shim_dir.mkdir(parents=True, mode=0o700)
    os.mkfifo(home.loc.shim_dir / "git")
    out = cli(home, "install", "git")
    assert out.returncode == 2 and "was not written by mcpshim" in out.stderr
    shutil.rmtree(home.loc.shim_dir)
