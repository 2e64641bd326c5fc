"""A shimmed run is the direct run: output, exit status, signals, stdin, environment, fds."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mcpshim.shim.manifest import load_manifest
from tests.fixtures.home import Home, install


def _both(
    home: Home, name: str, args: list[str], **kw: object
) -> tuple[subprocess.CompletedProcess[bytes], subprocess.CompletedProcess[bytes]]:
    m = load_manifest(home.loc.shim_dir)
    assert m is not None
    real = m.shims[name].target
    direct = subprocess.run([real, *args], capture_output=True, timeout=60, **kw)  # type: ignore[call-overload]
    shimmed = subprocess.run(
        [str(home.loc.shim_dir / name), *args], capture_output=True, timeout=60, **kw
    )  # type: ignore[call-overload]
    return direct, shimmed


def test_git_output_stderr_and_status_match(home: Home, interpreter: str, tmp_path: Path) -> None:
    install(home, ["git"], interpreter)
    for args in (["--version"], ["status"], ["rev-parse", "--no-such-flag"], ["help", "-a"]):
        d, s = _both(home, "git", args, cwd=tmp_path, env=home.env)
        assert (s.returncode, s.stdout, s.stderr) == (d.returncode, d.stdout, d.stderr), args


def test_exit_status_passes_through(home: Home, interpreter: str) -> None:
    install(home, ["sh"], interpreter)
    d, s = _both(home, "sh", ["-c", "exit 7"], env=home.env)
    assert d.returncode == s.returncode == 7


def test_signal_death_passes_through(home: Home, interpreter: str) -> None:
    install(home, ["sh"], interpreter)
    d, s = _both(home, "sh", ["-c", "kill -TERM $$"], env=home.env)
    assert d.returncode == s.returncode == -signal.SIGTERM


def test_signal_sent_to_the_shim_pid_reaches_the_target(home: Home, interpreter: str) -> None:
    install(home, ["sleep"], interpreter)
    proc = subprocess.Popen([str(home.loc.shim_dir / "sleep"), "30"], env=home.env)
    # once the record is written, the shim has exec'd (or is about to): same pid either way
    for _ in range(200):
        if home.loc.log_file.stat().st_size:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == -signal.SIGINT


def test_stdin_stdout_stderr_bytes_are_untouched(home: Home, interpreter: str) -> None:
    install(home, ["sh"], interpreter)
    payload = bytes(range(256)) * 4096 + b"\0tail\n"
    script = "cat; printf 'err\\0\\377' >&2"
    d, s = _both(home, "sh", ["-c", script], input=payload, env=home.env)
    assert s.stdout == d.stdout == payload
    assert s.stderr == d.stderr == b"err\0\xff"


def _env_of(cmd: list[str], env: dict[str, str], cwd: Path) -> dict[str, str]:
    out = subprocess.run([*cmd, "-0"], env=env, cwd=cwd, capture_output=True, check=True)
    pairs = [p.split("=", 1) for p in out.stdout.decode().split("\0") if p]
    return dict((k, v) for k, v in pairs)


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"LC_ALL": "C.UTF-8", "OLDPWD": "/usr"},
        {"LANG": "C.UTF-8", "_mcpshim_rr": "reserved"},
        {"MCPSHIM_SESSION": "s1", "ENV": "/etc/evil", "CDPATH": "/tmp"},
    ],
)
def test_environment_seen_by_the_target_is_the_callers(
    home: Home, interpreter: str, tmp_path: Path, extra: dict[str, str]
) -> None:
    install(home, ["env"], interpreter)
    # a POSIX shell always exports PWD naming its directory; give the caller that PWD
    base = {"HOME": home.env["HOME"], "PATH": "/usr/bin:/bin", "PWD": str(tmp_path), **extra}
    direct = _env_of(["/usr/bin/env"], base, tmp_path)
    shimmed = _env_of([str(home.loc.shim_dir / "env")], base, tmp_path)
    if "_mcpshim_rr" in extra:
        # names with the shim's private prefix are reserved (documented)
        direct.pop("_mcpshim_rr")
    assert shimmed == direct


def test_no_file_descriptor_leaks_into_the_target(home: Home, interpreter: str) -> None:
    install(home, ["ls"], interpreter)
    d, s = _both(home, "ls", ["/proc/self/fd"], env=home.env)
    assert s.stdout == d.stdout


def test_forged_pwd_and_agent_variables_change_neither_where_nor_what(
    home: Home, interpreter: str, tmp_path: Path
) -> None:
    install(home, ["true"], interpreter)
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    evil = tmp_path / "evil.sh"
    evil.write_text("printf() { :; }\nexport -f printf 2>/dev/null\n")
    agent = {
        "PWD": str(elsewhere),  # forged: not the cwd
        "HOME": str(elsewhere),
        "XDG_STATE_HOME": str(elsewhere),
        "XDG_DATA_HOME": str(elsewhere),
        "MCPSHIM_LOG": str(elsewhere / "x.log"),
        "MCPSHIM_DISABLE": "1",
        "BASH_ENV": str(evil),
        "ENV": str(evil),
        "BASH_FUNC_printf%%": "() { :; }",
        "BASH_FUNC_read%%": "() { :; }",
        "BASH_FUNC_cd%%": "() { :; }",
        "IFS": "x",
        "LC_ALL": "tr_TR.UTF-8",
        "_mcpshim_log": str(elsewhere),
        "PATH": str(elsewhere),
    }
    subprocess.run([str(home.loc.shim_dir / "true"), "arg"], cwd=link, env=agent, check=True)
    # the same through the symlinked path with a logical PWD
    subprocess.run(
        [str(home.loc.shim_dir / "true"), "arg2"], cwd=link, env={"PWD": str(link)}, check=True
    )
    assert list(elsewhere.iterdir()) == []
    recs = home.execs()
    assert [r.args for r in recs] == [(b"arg",), (b"arg2",)]
    assert {r.cwd for r in recs} == {os.fsencode(real)}
