"""The run fails when a test wrote into the real HOME's mcpshim directories (issue 30
item 9): a pytest of its own, over a probe that installs shims without the `home` fixture,
as `test_hostile_paths...` and others once did (lint-path then trusted their /tmp dirs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures import homeguard
from tests.fixtures.home import REPO

PROBE = Path(__file__).with_name("realhome_probe.py")


def _run(home: Path, writes: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "PYTEST_"))}
    env.update(HOME=str(home), PROBE_WRITES=writes, PROBE_REAL_HOME=str(home))
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
            "-q", str(PROBE)]  # fmt: skip
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_a_write_into_the_real_home_fails_the_run(tmp_path: Path) -> None:
    real = tmp_path / "real-home"
    real.mkdir()
    done = _run(real, writes="real")
    assert done.returncode != 0, done.stdout
    assert "the test run wrote into the real HOME" in done.stdout
    assert f"created {real}/.local/state/mcpshim/shim-dirs" in done.stdout
    # and a run that leaves it alone passes
    clean = tmp_path / "clean-home"
    clean.mkdir()
    done = _run(clean, writes="none")
    assert done.returncode == 0, done.stdout
    assert not (clean / ".local").exists()


def test_a_test_that_forgot_the_home_fixture_writes_in_the_suites_throwaway_home(
    tmp_path: Path,
) -> None:
    """Every test runs on a throwaway HOME (tests/conftest.py), every XDG dir with it: an
    install without the `home` fixture registers its shim dir there, not in the real one."""
    real = tmp_path / "real-home"
    real.mkdir()
    done = _run(real, writes="forgot")
    assert done.returncode == 0, done.stdout
    assert list(real.iterdir()) == []


def test_changes_name_what_was_created_changed_and_removed(tmp_path: Path) -> None:
    home = tmp_path / "h"
    state = home / ".local/state/mcpshim"
    state.mkdir(parents=True)
    (state / "keep").write_text("a")
    (state / "edit").write_text("a")
    (state / "gone").write_text("a")
    (home / ".cache").mkdir()
    roots = homeguard.real_roots({"HOME": str(home)})
    before = homeguard.snapshot(roots)
    (state / "edit").write_text("bb")
    (state / "gone").unlink()
    (home / ".cache/mcpshim-corpus").mkdir()
    (home / ".cache/other").mkdir()
    assert homeguard.changes(before, homeguard.snapshot(roots)) == [
        f"created {home}/.cache/mcpshim-corpus",
        f"changed {state}/edit",
        f"removed {state}/gone",
    ]


BENCHMARKS = REPO / "benchmarks"


def test_every_benchmark_runs_on_a_throwaway_home() -> None:
    """Each script of benchmarks/ moves HOME first thing (benchmarks/throwaway.py)."""
    scripts = [p for p in BENCHMARKS.glob("*.py") if p.name not in ("stats.py", "throwaway.py")]
    assert len(scripts) >= 10
    for p in scripts:
        text = p.read_text()
        main = text.split('\nif __name__ == "__main__":\n', 1)
        assert len(main) == 2, p.name
        assert main[1].lstrip().startswith("throwaway_home()"), p.name


def test_a_benchmark_that_installs_shims_leaves_the_real_home_alone(tmp_path: Path) -> None:
    real = tmp_path / "real-home"
    real.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env["HOME"] = str(real)
    argv = [sys.executable, str(BENCHMARKS / "scrub_cost.py"), "-n", "1", "--args", "5",
            "--huge", "64"]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert homeguard.snapshot(homeguard.real_roots(env)) == {}
    assert list(real.iterdir()) == []
