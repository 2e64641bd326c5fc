"""Every file the shim writes: a failure follows --on-log-failure, started from real shells.

A shim's parent is usually a shell, and a shell parent takes the rare path that writes the
parents/ marker (and, first in a boot, the boot anchor). Each breaker below spoils one of
those writes for real (CI runs as root, for whom chmod stops nothing): a directory missing or
a file in its place, a FIFO for the log (an open would block), a symlink to a victim, a file
of another uid. The shim must then run the target with one warning line or refuse with 126,
never die, hang, or write through the symlink.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.home import Home, install

PARENTS = ["bash", "dash", "sh"]
VICTIM = b"# the user's own file\nalias ll='ls -l'\n"
BIG = "x" * 6000  # a record too large for one write: it goes to a spill file
FOREIGN_UID = 12345


def _boot() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def _replace_dir_with_file(d: Path) -> None:
    shutil.rmtree(d)
    d.write_text("not a directory\n")


def _missing_dir(home: Home) -> None:
    shutil.rmtree(home.loc.log_dir)


def _parents_unwritable(home: Home) -> None:
    _replace_dir_with_file(home.loc.parents_dir)


def _boot_unwritable(home: Home) -> None:
    _replace_dir_with_file(home.loc.boot_dir)


def _spill_unwritable(home: Home) -> None:
    _replace_dir_with_file(home.loc.spill_dir)


def _log_is_fifo(home: Home) -> None:
    home.loc.log_file.unlink()
    os.mkfifo(home.loc.log_file)


def _log_is_symlink(home: Home) -> None:
    home.loc.log_file.unlink()
    home.loc.log_file.symlink_to(home.root / ".bashrc")


def _log_is_dangling_symlink(home: Home) -> None:
    home.loc.log_file.unlink()
    home.loc.log_file.symlink_to(home.root / "made-by-the-shim")


def _log_of_another_user(home: Home) -> None:
    os.chown(home.loc.log_file, FOREIGN_UID, FOREIGN_UID)


def _anchor_is_dangling_symlink(home: Home) -> None:
    anchor = home.loc.boot_dir / _boot()
    anchor.unlink()
    anchor.symlink_to(home.root / "made-by-the-shim")


#: breaker -> (does the record still reach the log in run mode, does it need a big record)
BREAKERS: dict[str, tuple[Callable[[Home], None], bool, bool]] = {
    "missing-dir": (_missing_dir, False, False),
    "parents-unwritable": (_parents_unwritable, True, False),
    "boot-unwritable": (_boot_unwritable, True, False),
    "spill-unwritable": (_spill_unwritable, False, True),
    "log-fifo": (_log_is_fifo, False, False),
    "log-symlink": (_log_is_symlink, False, False),
    "log-dangling-symlink": (_log_is_dangling_symlink, False, False),
    "log-foreign-owner": (_log_of_another_user, False, False),
    "anchor-symlink": (_anchor_is_dangling_symlink, True, False),
}


def _from_shell(
    home: Home, parent: str, arg: str = "", timeout: float = 20
) -> subprocess.CompletedProcess[str]:
    """`sh -c 'echo ran' ARG` run by a real shell found on PATH, as an agent's shell would."""
    shell = shutil.which(parent)
    if shell is None:
        pytest.skip(f"{parent} not installed")
    env = {**home.env, "PATH": f"{home.loc.shim_dir}:/usr/bin:/bin"}
    script = 'sh -c "echo ran" sh "$1"; echo "rc=$?"'
    return subprocess.run(
        [shell, "-c", script, parent, arg],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("parent", PARENTS)
@pytest.mark.parametrize("breaker", sorted(BREAKERS))
@pytest.mark.parametrize("mode", ["run", "refuse"])
def test_a_failed_write_follows_the_failure_mode_under_a_shell_parent(
    home: Home, interpreter: str, parent: str, breaker: str, mode: str
) -> None:
    install(home, ["sh"], interpreter, on_failure=mode)
    (home.root / ".bashrc").write_bytes(VICTIM)
    brk, record_kept, big = BREAKERS[breaker]
    brk(home)
    out = _from_shell(home, parent, BIG if big else "")
    assert out.stderr.count("\n") == 1, out.stderr
    if mode == "run":
        assert out.stdout == "ran\nrc=0\n"
        assert out.stderr.startswith("mcpshim: warning: the exec log "), out.stderr
    else:
        assert out.stdout == "rc=126\n"
        assert out.stderr.startswith("mcpshim: refusing to run "), out.stderr
    # nothing was written through a symlink, and nothing was made where one pointed
    assert (home.root / ".bashrc").read_bytes() == VICTIM
    assert not (home.root / "made-by-the-shim").exists()
    if breaker in ("parents-unwritable", "boot-unwritable", "anchor-symlink"):
        # the log itself is fine: a record in run mode, none for a refused exec
        assert len(home.execs()) == (1 if mode == "run" and record_kept else 0)


@pytest.mark.parametrize("parent", PARENTS)
def test_a_healthy_log_under_a_shell_parent_says_nothing(
    home: Home, interpreter: str, parent: str
) -> None:
    install(home, ["sh"], interpreter, on_failure="refuse")
    out = _from_shell(home, parent)
    assert (out.stdout, out.stderr) == ("ran\nrc=0\n", "")
    [rec] = home.execs()
    assert rec.parent_cmdline.startswith(os.fsencode(shutil.which(parent) or parent))


def test_a_planted_parent_marker_symlink_is_not_written_through(
    home: Home, interpreter: str
) -> None:
    """parents/<boot>.<shell pid> as a symlink to the user's file (the shell plants it for
    its own pid, so the name is the one the shim will use)."""
    install(home, ["sh"], interpreter)
    victim = home.root / ".bashrc"
    victim.write_bytes(VICTIM)
    os.utime(victim, (1, 1))  # older than /proc/<pid>: the marker looks stale
    env = {**home.env, "PATH": f"{home.loc.shim_dir}:/usr/bin:/bin"}
    plant = f'ln -s {victim} {home.loc.parents_dir}/{_boot()}.$$; sh -c "echo ran"; echo "rc=$?"'
    out = subprocess.run(
        ["/bin/dash", "-c", plant], env=env, capture_output=True, text=True, timeout=20
    )
    assert out.stdout == "ran\nrc=0\n"
    assert out.stderr.startswith("mcpshim: warning: the exec log ") and "symlink" in out.stderr
    assert victim.read_bytes() == VICTIM


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


def test_files_the_shim_creates_are_0600_and_the_umask_does_not_leak(
    home: Home, interpreter: str, tmp_path: Path
) -> None:
    install(home, ["sh"], interpreter)
    home.loc.log_file.unlink()
    for anchor in home.loc.boot_dir.iterdir():
        anchor.unlink()
    env = {**home.env, "PATH": f"{home.loc.shim_dir}:/usr/bin:/bin"}
    # a shell parent (marker, anchor), a big record (spill file) and the target's umask
    script = 'umask 022; sh -c umask; sh -c "umask" sh "$1"'
    out = subprocess.run(
        ["/bin/dash", "-c", script, "dash", BIG], env=env, capture_output=True, text=True
    )
    assert (out.stdout, out.stderr) == ("0022\n0022\n", "")
    assert len(home.execs()) == 2
    made = [home.loc.log_file]
    for d in (home.loc.boot_dir, home.loc.spill_dir, home.loc.parents_dir):
        assert _mode(d) == 0o700
        made += list(d.iterdir())
        assert made[-1].parent == d  # one file at least in each
    assert {p.name: _mode(p) for p in made} == {p.name: 0o600 for p in made}
