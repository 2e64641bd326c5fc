"""When the log cannot be written the shim does what install chose, and never hangs.

CI runs as root, for whom chmod stops nothing, so each failure is made for real another way:
a missing directory, a file where the directory should be, /dev/full (ENOSPC), RLIMIT_FSIZE.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from mcpshim.log import execlog
from tests.fixtures.home import Home, install


def _missing_dir(home: Home) -> None:
    shutil.rmtree(home.loc.log_dir)


def _file_instead_of_dir(home: Home) -> None:
    shutil.rmtree(home.loc.log_dir)
    home.loc.log_dir.write_text("not a directory\n")


def _disk_full(home: Home) -> None:
    home.loc.log_file.unlink()
    home.loc.log_file.symlink_to("/dev/full")


BREAKERS: dict[str, Callable[[Home], None]] = {
    "missing-dir": _missing_dir,
    "file-not-dir": _file_instead_of_dir,
    "enospc": _disk_full,
}


def _limit_fsize(limit: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def _run_marker(home: Home, tmp_path: Path, **kw: object) -> subprocess.CompletedProcess[bytes]:
    marker = tmp_path / "target-ran"
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [str(home.loc.shim_dir / "sh"), "-c", f"touch '{marker}'"],
        env=home.env,
        capture_output=True,
        timeout=30,
        **kw,
    )


@pytest.mark.parametrize("breaker", sorted(BREAKERS))
def test_run_mode_runs_the_target_with_one_warning(
    home: Home, interpreter: str, tmp_path: Path, breaker: str
) -> None:
    install(home, ["sh"], interpreter)
    BREAKERS[breaker](home)
    out = _run_marker(home, tmp_path)
    assert out.returncode == 0
    assert (tmp_path / "target-ran").exists()
    assert out.stderr.count(b"\n") == 1
    assert out.stderr.startswith(b"mcpshim: warning: the exec log ")


@pytest.mark.parametrize("breaker", sorted(BREAKERS))
def test_refuse_mode_exits_126_without_running_the_target(
    home: Home, interpreter: str, tmp_path: Path, breaker: str
) -> None:
    install(home, ["sh"], interpreter, on_failure="refuse")
    BREAKERS[breaker](home)
    out = _run_marker(home, tmp_path)
    assert out.returncode == 126
    assert not (tmp_path / "target-ran").exists()
    assert out.stderr.startswith(b"mcpshim: refusing to run ")
    assert out.stderr.count(b"\n") == 1


@pytest.mark.parametrize("mode", ["run", "refuse"])
def test_file_size_limit_fails_the_write_not_the_shim(
    home: Home, interpreter: str, tmp_path: Path, mode: str
) -> None:
    install(home, ["sh"], interpreter, on_failure=mode)
    _run_marker(home, tmp_path)  # one good record first
    (tmp_path / "target-ran").unlink()
    size = home.loc.log_file.stat().st_size
    out = _run_marker(home, tmp_path, preexec_fn=_limit_fsize(size))
    if mode == "run":
        assert out.returncode == 0 and (tmp_path / "target-ran").exists()
        assert out.stderr.startswith(b"mcpshim: warning:")
    else:
        assert out.returncode == 126 and not (tmp_path / "target-ran").exists()
    assert home.loc.log_file.stat().st_size == size
    assert len(home.execs()) == 1


@pytest.mark.parametrize("mode", ["run", "refuse"])
def test_a_large_record_whose_spill_cannot_be_written(
    home: Home, interpreter: str, tmp_path: Path, mode: str
) -> None:
    install(home, ["sh"], interpreter, on_failure=mode)
    shutil.rmtree(home.loc.spill_dir)
    marker = tmp_path / "ran"
    out = subprocess.run(
        [str(home.loc.shim_dir / "sh"), "-c", f"touch '{marker}'", "x" * 20_000],
        env=home.env,
        capture_output=True,
        timeout=30,
    )
    assert out.returncode == (0 if mode == "run" else 126)
    assert marker.exists() == (mode == "run")
    assert out.stderr.count(b"\n") == 1
    assert home.execs() == []  # no pointer to a record that does not exist


def test_a_record_cut_short_is_reported_and_the_rest_still_read(
    home: Home, interpreter: str, tmp_path: Path
) -> None:
    install(home, ["sh"], interpreter)
    _run_marker(home, tmp_path)
    size = home.loc.log_file.stat().st_size
    # the limit lets 40 bytes of the next record through: a real torn write
    torn = _run_marker(home, tmp_path, preexec_fn=_limit_fsize(size + 40))
    assert torn.returncode == 0
    assert home.loc.log_file.stat().st_size == size + 40
    _run_marker(home, tmp_path)
    problems: list[execlog.LogProblem] = []
    recs = list(execlog.iter_records(home.loc, problems))
    assert len(recs) == 2
    assert [p.message for p in problems] == ["torn record skipped"]
    # and a record torn at the very end of the log
    with home.loc.log_file.open("ab") as fh:
        fh.write(b"\0R\0=1\0=exec\0=partial")
    problems.clear()
    assert len(list(execlog.iter_records(home.loc, problems))) == 2
    assert [p.message for p in problems] == [
        "torn record skipped",
        "torn trailing record (cut short while written)",
    ]


def test_target_still_runs_when_even_stderr_is_closed(
    home: Home, interpreter: str, tmp_path: Path
) -> None:
    install(home, ["sh"], interpreter)
    _missing_dir(home)
    marker = tmp_path / "ran"
    rc = subprocess.run(
        [str(home.loc.shim_dir / "sh"), "-c", f"touch '{marker}'"],
        env=home.env,
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        timeout=30,
        pass_fds=(),
        preexec_fn=lambda: os.close(2),
    ).returncode
    assert rc == 0 and marker.exists()
