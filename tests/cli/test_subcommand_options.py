"""Options a subcommand acts on are accepted after it too (issue 30 item 7): `mcpshim log
seal --log-dir D` and `mcpshim log verify --log-dir D` as well as `mcpshim log --log-dir D
seal`; the same option given on both sides with two values is a usage error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fixtures.home import Home, install

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def _mcpshim(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPSHIM, *args], env=home.env, capture_output=True, text=True, timeout=120
    )


def _a_log_elsewhere(home: Home, tmp_path: Path) -> tuple[str, str]:
    """Shims whose log is not the default one, and one exec recorded in it."""
    shims, log = tmp_path / "shims", tmp_path / "elsewhere-log"
    install(home, ["git"])  # the default dir: a log that must stay untouched
    done = _mcpshim(home, "install", "git", "--dir", str(shims), "--log-dir", str(log))
    assert done.returncode == 0, done.stderr
    subprocess.run([str(shims / "git"), "--version"], env=home.env, capture_output=True, check=True)
    return str(shims), str(log)


def test_log_dir_after_seal_verify_and_rotate(home: Home, tmp_path: Path) -> None:
    shims, log = _a_log_elsewhere(home, tmp_path)
    done = _mcpshim(home, "log", "seal", "--init", "--no-anchor", "--log-dir", log)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("mcpshim-verifier-1:")
    verifier = done.stdout.strip()
    assert not (home.loc.log_dir / "seal").exists() or not any(
        (home.loc.log_dir / "seal").iterdir()
    )
    done = _mcpshim(home, "log", "verify", "--key", verifier, "--log-dir", log)
    assert done.returncode == 0, done.stdout + done.stderr
    assert log in done.stdout
    # the same, with the option before the subcommand (as before)
    done = _mcpshim(home, "log", "--log-dir", log, "verify", "--key", verifier)
    assert done.returncode == 0, done.stdout + done.stderr
    # --dir after the subcommand: the log its shims are pinned to
    done = _mcpshim(home, "log", "verify", "--dir", shims, "--format", "json")
    assert done.returncode == 0 and log in done.stdout, done.stdout + done.stderr
    done = _mcpshim(home, "log", "rotate", "--log-dir", log)
    assert done.returncode == 0 and done.stdout.startswith(f"rotated to {log}/"), done.stdout


def test_the_same_option_twice_with_two_values_is_a_usage_error(home: Home, tmp_path: Path) -> None:
    _shims, log = _a_log_elsewhere(home, tmp_path)
    done = _mcpshim(home, "log", "--log-dir", str(tmp_path), "verify", "--log-dir", log)
    assert done.returncode == 2
    assert done.stderr.startswith("mcpshim: error: --log-dir given twice"), done.stderr
