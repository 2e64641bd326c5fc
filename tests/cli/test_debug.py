"""`--debug` shows the traceback behind an error; without it an error stays one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fixtures.home import Home

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def _review_missing_policy(
    home: Home, tmp_path: Path, *pre: str
) -> subprocess.CompletedProcess[str]:
    missing = tmp_path / "no-such-policy.toml"
    return subprocess.run(
        [*MCPSHIM, *pre, "review", "--policy", str(missing)],
        env=home.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_error_is_one_line_without_debug(home: Home, tmp_path: Path) -> None:
    out = _review_missing_policy(home, tmp_path)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith("mcpshim: error: ") and "cannot read policy" in out.stderr


def test_debug_prints_the_traceback_then_the_same_line(home: Home, tmp_path: Path) -> None:
    plain = _review_missing_policy(home, tmp_path)
    out = _review_missing_policy(home, tmp_path, "--debug")
    assert out.returncode == 2
    assert out.stderr.startswith("Traceback (most recent call last):")
    assert "InputError" in out.stderr and "load_policy" in out.stderr
    assert out.stderr.splitlines()[-1] == plain.stderr.strip()


def test_debug_is_an_option_not_the_environment(home: Home, tmp_path: Path) -> None:
    env = {**home.env, "MCPSHIM_DEBUG": "1", "DEBUG": "1"}
    out = subprocess.run(
        [*MCPSHIM, "review", "--policy", str(tmp_path / "none.toml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in out.stderr


def _mcpshim(home: Home, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPSHIM, *argv], env=home.env, capture_output=True, text=True, timeout=60, check=False
    )


def test_bare_mcpshim_prints_its_help_and_exits_0(home: Home) -> None:
    bare, helped = _mcpshim(home), _mcpshim(home, "--help")
    assert (bare.returncode, bare.stderr) == (0, "")
    assert bare.stdout == helped.stdout and bare.stdout.startswith("Usage: mcpshim [OPTIONS]")
    # a group named without its command does the same (`mcpshim policy`)
    group = _mcpshim(home, "policy")
    assert (group.returncode, group.stderr) == (0, "")
    assert group.stdout == _mcpshim(home, "policy", "--help").stdout


def test_debug_without_a_command_is_a_usage_error_in_one_line(home: Home) -> None:
    out = _mcpshim(home, "--debug")
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == "mcpshim: error: Missing command. (see `mcpshim --help`)\n"
