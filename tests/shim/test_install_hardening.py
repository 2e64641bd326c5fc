"""install refuses a log dir others could write; what it writes is the user's alone; `list`
sees an edited or missing library; values reach the shim quoted once, whatever they hold.

Tests run as root: another owner is made with os.chown to an unused uid.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mcpshim.errors import UsageError
from mcpshim.paths import Locations
from mcpshim.shim import install as shim_install
from mcpshim.shim import render
from tests.fixtures.home import Home, dash_path

MCPSHIM = [sys.executable, "-m", "mcpshim"]
OTHER = 12345


def cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPSHIM, *args], env=home.env, capture_output=True, text=True, timeout=120
    )


def _world_writable(log: Path, home: Home) -> None:
    log.mkdir(parents=True)
    log.chmod(0o777)


def _group_writable_parent(log: Path, home: Home) -> None:
    log.parent.mkdir(parents=True)
    log.parent.chmod(0o775)


def _sticky_parent_of_another(log: Path, home: Home) -> None:
    log.parent.mkdir(parents=True)
    log.parent.chmod(0o1777)
    os.chown(log.parent, OTHER, OTHER)


def _another_owner(log: Path, home: Home) -> None:
    log.mkdir(parents=True)
    os.chown(log, OTHER, OTHER)


def _symlinked_log(log: Path, home: Home) -> None:
    log.mkdir(parents=True)
    (log / "exec.log").symlink_to(home.root / ".bashrc")


def _parents_full_of_symlinks(log: Path, home: Home) -> None:
    (log / "parents").mkdir(parents=True)
    for pid in range(1, 50):
        (log / "parents" / f"boot.{pid}").symlink_to(home.root / ".bashrc")


def _log_of_another_owner(log: Path, home: Home) -> None:
    log.mkdir(parents=True)
    (log / "exec.log").write_bytes(b"")
    os.chown(log / "exec.log", OTHER, OTHER)


def _fifo_log(log: Path, home: Home) -> None:
    log.mkdir(parents=True)
    os.mkfifo(log / "exec.log")


def _world_writable_spill(log: Path, home: Home) -> None:
    (log / "spill").mkdir(parents=True)
    (log / "spill").chmod(0o777)


BAD: dict[str, tuple[Callable[[Path, Home], None], str]] = {
    "0777": (_world_writable, "group- or world-writable"),
    "group-writable-parent": (_group_writable_parent, "group- or world-writable"),
    "sticky-parent-of-another": (_sticky_parent_of_another, "neither you nor root"),
    "another-owner": (_another_owner, "neither you nor root"),
    "symlinked-exec-log": (_symlinked_log, "is a symlink"),
    "parents-symlinks": (_parents_full_of_symlinks, "is a symlink"),
    "exec-log-of-another": (_log_of_another_owner, "not yours"),
    "fifo-exec-log": (_fifo_log, "not a regular file"),
    "world-writable-spill": (_world_writable_spill, "group- or world-writable"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_log_dir_others_can_write_is_refused(home: Home, tmp_path: Path, case: str) -> None:
    victim = home.root / ".bashrc"
    victim.write_text("# mine\n")
    log = tmp_path / "shared" / "log"
    make, why = BAD[case]
    make(log, home)
    out = cli(home, "install", "--log-dir", str(log), "sh")
    assert out.returncode == 2, out.stdout
    assert "refusing the log directory" in out.stderr and why in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert victim.read_text() == "# mine\n"
    assert not (home.loc.shim_dir / "sh").exists()


def test_a_sticky_root_owned_parent_like_tmp_is_accepted(home: Home, tmp_path: Path) -> None:
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    out = cli(home, "install", "--log-dir", str(sticky / "log"), "sh")
    assert out.returncode == 0, out.stderr


def test_a_shim_dir_others_can_write_is_refused(home: Home, tmp_path: Path) -> None:
    shims = tmp_path / "shims"
    shims.mkdir(mode=0o777)
    shims.chmod(0o777)
    out = cli(home, "install", "--dir", str(shims), "sh")
    assert out.returncode == 2 and "refusing the shim directory" in out.stderr


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


def test_install_creates_directories_0700_and_files_0600(home: Home) -> None:
    os.umask(0o022)
    assert cli(home, "install", "sh").returncode == 0
    state = home.root / ".local" / "state"
    dirs = [state, state / "mcpshim", home.loc.log_dir, home.loc.shim_dir]
    dirs += [home.loc.spill_dir, home.loc.boot_dir, home.loc.parents_dir]
    assert {str(d): _mode(d) for d in dirs} == {str(d): 0o700 for d in dirs}
    files = [home.loc.log_file, home.loc.lock_file, *home.loc.boot_dir.iterdir()]
    assert {str(f): _mode(f) for f in files} == {str(f): 0o600 for f in files}


def test_list_notices_an_edited_or_missing_library(home: Home) -> None:
    assert cli(home, "install", "sh").returncode == 0
    out = cli(home, "list")
    assert out.returncode == 0 and f"{render.LIB} ok" in " ".join(out.stdout.split())
    lib = home.loc.shim_dir / render.LIB
    lib.write_text(lib.read_text() + "\n_mcpshim_scrub1() { _mcpshim_r=$1; }\n")
    out = cli(home, "list")
    assert out.returncode == 1 and "lib-edited" in out.stdout
    json_out = cli(home, "list", "--format", "json")
    assert json_out.returncode == 1 and '"state": "lib-edited"' in json_out.stdout
    lib.unlink()
    out = cli(home, "list")
    assert out.returncode == 1 and "lib-missing" in out.stdout
    assert cli(home, "install", "sh").returncode == 0  # install puts it back
    assert cli(home, "list").returncode == 0


#: values that held a marker, quotes, blanks, command substitutions
HOSTILE = [
    "inj@@ONFAIL@@",
    "x@@LOGDIR@@y@@TARGET@@z@@LIB@@",
    'it\'s "q" $(touch pwned) `touch pwned2` ${HOME} \\ *',
    "@@NAME@@@@SHELLS@@@@TRIGGERS@@",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_paths_reach_the_shim_as_they_are(home: Home, tmp_path: Path, value: str) -> None:
    root = tmp_path / value
    loc = Locations(root / "shims", root / "log")
    target_dir = tmp_path / "bin" / value
    target_dir.mkdir(parents=True)
    target = target_dir / "tool"
    shutil.copy2(shutil.which("true") or "/bin/true", target)
    shim_install.install(
        loc, [], {"tool": str(target)}, on_failure="refuse", interpreter=dash_path(),
        allow_unsafe=True,
    )  # fmt: skip
    text = (loc.shim_dir / "tool").read_text()
    assert "\n_mcpshim_fail=refuse\n" in text
    out = subprocess.run(
        [str(loc.shim_dir / "tool"), "arg"], cwd=tmp_path, capture_output=True, timeout=30
    )
    assert (out.returncode, out.stderr) == (0, b"")
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
    from mcpshim.log import execlog

    problems: list[execlog.LogProblem] = []
    [rec] = list(execlog.iter_records(loc, problems))
    assert isinstance(rec, execlog.ExecRecord)
    assert rec.target == os.fsencode(target) and rec.args == (b"arg",)


@pytest.mark.parametrize("bad", ["/l\nrm -rf ~", "/l\0x", "rel/dir"])
def test_values_that_cannot_be_a_path_are_refused(bad: str) -> None:
    with pytest.raises(UsageError):
        render.render_shim("git", "/bin/true", bad)
    with pytest.raises(UsageError):
        render.render_shim("git", bad, "/var/log/mcpshim")


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_the_python_writer_never_writes_through_a_symlink_or_into_a_fifo(
    tmp_path: Path, kind: str
) -> None:
    from mcpshim.log import eventlog

    loc = Locations(tmp_path / "shims", tmp_path / "state" / "log")
    victim = tmp_path / "victim"
    victim.write_text("# mine\n")
    eventlog.append_event(loc, "note", {"n": 1})  # creates the log dir and the log
    assert _mode(tmp_path / "state") == 0o700 and _mode(loc.log_dir) == 0o700
    assert _mode(loc.log_file) == 0o600
    loc.log_file.unlink()
    if kind == "symlink":
        loc.log_file.symlink_to(victim)
    else:
        os.mkfifo(loc.log_file)
    with pytest.raises(OSError):
        eventlog.EventLog(loc, timeout=5).append("note", {"n": 2})
    assert victim.read_text() == "# mine\n"
