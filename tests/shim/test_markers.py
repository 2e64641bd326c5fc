"""`parents/` markers suppress evidence (a shell's later children do not record its line
again), so only the shim's own may: one planted for pids to come, dated in the future, does
not stop the next shell's line from being kept, and `log verify` names every marker no
record backs. Shims started from real shells (dash -c, bash -c)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpshim.log import execlog, rotation
from tests.fixtures.contract import verify_code
from tests.fixtures.home import Home, install
from tests.fixtures.nativekit import need_cc

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def _env(home: Home) -> dict[str, str]:
    return {**home.env, "PATH": f"{home.loc.shim_dir}:/usr/bin:/bin"}


def _marker_problems(home: Home) -> dict[str, str]:
    loc = ["--dir", str(home.loc.shim_dir), "--log-dir", str(home.loc.log_dir)]
    out = subprocess.run(
        [*MCPSHIM, "log", *loc, "verify", "--format", "json"],
        env=home.env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    doc = json.loads(out.stdout)
    assert out.returncode == verify_code(doc), out.stderr
    return {p["where"]: p["message"] for p in doc["problems"] if p["kind"] == "marker"}


def _last_pid() -> int:
    return int(Path("/proc/sys/kernel/ns_last_pid").read_text())


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_markers_planted_ahead_and_dated_in_the_future_suppress_nothing(
    home: Home, interpreter: str, shell: str
) -> None:
    install(home, ["git"], interpreter)
    _planted_ahead(home, shell)


def test_the_native_shim_takes_no_marker_dated_ahead_either(home: Home) -> None:
    need_cc()
    install(home, ["git"], native_mode="require")
    _planted_ahead(home, "dash")


def _planted_ahead(home: Home, shell: str) -> None:
    path = shutil.which(shell)
    if path is None:
        pytest.skip(f"{shell} not installed")
    boot = execlog.current_boot_id()
    home.loc.parents_dir.mkdir(parents=True, exist_ok=True)
    ahead = time.time() + 3600
    first = _last_pid() + 1
    planted = [home.loc.parents_dir / f"{boot}.{pid}" for pid in range(first, first + 400)]
    for m in planted:
        m.touch(mode=0o600)
        os.utime(m, (ahead, ahead))
    script = "git --version >/dev/null; git --version >/dev/null; echo $$"
    out = subprocess.run(
        [path, "-c", script], env=_env(home), capture_output=True, text=True, check=True
    )
    shell_pid = int(out.stdout.strip())
    assert first <= shell_pid < first + 400, "the shell's pid was not among those planted"
    one, two = home.execs()
    assert one.ppid == two.ppid == shell_pid
    assert script.encode() in one.parent_cmdline  # kept in spite of the planted marker
    assert two.parent_cmdline == b""  # the shim's own marker spares the second child
    mine = home.loc.parents_dir / f"{boot}.{shell_pid}"
    assert mine.read_text() == f"{one.parent_start}\n"
    # verify names every planted marker still there, and not the shim's own
    problems = _marker_problems(home)
    assert f"parents/{mine.name}" not in problems
    assert {f"parents/{m.name}" for m in planted if m != mine} <= set(problems)
    assert all("is empty" in why for why in problems.values())


def test_verify_names_a_marker_planted_for_a_running_shell(home: Home, interpreter: str) -> None:
    """Dated after the shell's /proc entry and before its child: the shim must take it for
    its own by its dates (reading the parent's start costs every exec), so the line is not
    kept; verify says so."""
    install(home, ["ls"], interpreter)
    boot = execlog.current_boot_id()
    home.loc.parents_dir.mkdir(parents=True, exist_ok=True)
    shell = subprocess.Popen(
        ["dash", "-c", "read go; ls -d / >/dev/null"],
        env=_env(home),
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        os.stat(f"/proc/{shell.pid}")  # its /proc entry made now, before the marker
        time.sleep(0.05)
        marker = home.loc.parents_dir / f"{boot}.{shell.pid}"
        marker.write_text("12345\n")  # a start time, but not the shell's, and no record
        time.sleep(0.05)
        shell.communicate("go\n", timeout=30)
    finally:
        shell.kill()
    [rec] = home.execs()
    assert rec.ppid == shell.pid
    problems = _marker_problems(home)
    assert "no record in the log holds the command line" in problems[f"parents/{marker.name}"]


def test_the_shims_own_markers_pass_and_go_with_the_segments(home: Home, interpreter: str) -> None:
    install(home, ["ls"], interpreter)
    for i in range(3):
        line = f"ls -d /{i} 2>/dev/null; ls -d / >/dev/null; exit 0"
        subprocess.run(["bash", "-c", line], env=_env(home), check=True)
    keeper = subprocess.Popen(
        ["dash", "-c", "ls -d / >/dev/null; read go"],
        env=_env(home),
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(500):
            if len(home.execs()) == 7:
                break
            time.sleep(0.01)
        assert len([r for r in home.execs() if r.parent_cmdline]) == 4
        assert _marker_problems(home) == {}
        # its record's segment removed by `rotate --keep`: its marker goes too (the shell,
        # still running, keeps its line again with its next child)
        rotation.rotate(home.loc)
        rotation.rotate(home.loc, keep=0)
        assert not list(home.loc.parents_dir.iterdir())
        assert _marker_problems(home) == {}
    finally:
        keeper.communicate("go\n", timeout=30)
