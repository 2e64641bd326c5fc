"""Under CI=true a missing tool fails the run instead of skipping (tests/conftest.py): CI
installs what the suite needs (scripts/system-deps.sh), so a skip there hides a broken CI.
Elsewhere the same test skips and says why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.home import REPO

PROBE = Path(__file__).with_name("ciskip_probe.py")


def _probe(ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    if ci:
        env["CI"] = "true"
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
            "-q", "-rA", str(PROBE)]  # fmt: skip
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_a_missing_tool_fails_under_ci_and_skips_elsewhere() -> None:
    ci = _probe(ci=True)
    assert ci.returncode == 1, ci.stdout
    assert "1 failed, 1 skipped" in ci.stdout
    assert "under CI=true a missing tool fails, not skips: frobnicate not installed" in ci.stdout
    plain = _probe(ci=False)
    assert plain.returncode == 0, plain.stdout
    assert "2 skipped" in plain.stdout


def test_system_deps_installs_each_tool_the_suite_looks_for() -> None:
    """Every program a test skips without (shutil.which/`command -v` of a name) is one
    scripts/system-deps.sh checks and installs."""
    script = (REPO / "scripts" / "system-deps.sh").read_text()
    for tool in ("dash", "bash", "cc", "strace", "shellcheck", "lsof", "zsh", "chromium",
                 "rsyslogd", "logger", "node", "npm", "git", "curl", "make", "flock",
                 "setpriv"):  # fmt: skip
        assert f"command -v {tool} " in script, tool
