"""`mcpshim run` with real processes: exit status, signals, stdio, session records, PATH."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mcpshim.log.redact import is_credential_name
from tests.fixtures.home import Home, install
from tests.fixtures.runhelp import events, only_session, poll, run, run_argv


@pytest.mark.parametrize(
    ("script", "status"),
    [("exit 7", 7), ("exit 0", 0), ("kill -TERM $$", 143), ("kill -KILL $$", 137)],
)
def test_exit_status_is_the_commands(home: Home, script: str, status: int) -> None:
    res = run(home, ["sh", "-c", script])
    assert res.returncode == status
    [end] = events(home, "session-end")
    assert end["exit_status"] == status
    assert end["session"] == only_session(home)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signal_to_the_supervisor_reaches_the_command(
    home: Home, tmp_path: Path, sig: signal.Signals
) -> None:
    ready, got = tmp_path / "ready", tmp_path / "got"
    child = (
        "import os, signal, sys, time\n"
        "def h(n, f):\n"
        f"    open({str(got)!r}, 'w').write(str(n)); sys.exit(42)\n"
        "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP): signal.signal(s, h)\n"
        f"open({str(ready)!r}, 'w').write('x')\n"
        "time.sleep(120)\n"
    )
    proc = subprocess.Popen(run_argv(home, [sys.executable, "-c", child]), env=home.env)
    try:
        poll(lambda: ready.exists(), "the command to start")
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 42
    finally:
        proc.kill()
    assert got.read_text() == str(int(sig))


def test_unhandled_forwarded_signal_gives_128_plus_n(home: Home, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        run_argv(home, ["sh", "-c", f": > {ready}; exec sleep 120"]), env=home.env
    )
    try:
        # The command can touch `ready` before the supervisor has written its first record.
        def started() -> list[dict[str, object]] | None:
            if ready.exists() and home.loc.log_file.exists():
                return events(home, "session-start")
            return None

        poll(started, "the command to start")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        proc.kill()


def test_stdio_is_passed_through_byte_for_byte(home: Home) -> None:
    install(home, ["git"])
    data = os.urandom(1 << 20) + b"\0\r\n\x1b[2J" + bytes(range(256))
    res = run(home, ["sh", "-c", "cat; printf err >&2"], input=data, capture_output=True)
    assert res.returncode == 0
    assert hashlib.sha256(res.stdout).hexdigest() == hashlib.sha256(data).hexdigest()
    assert res.stderr == b"err"


def test_session_env_and_shims_first_on_path(home: Home, interpreter: str) -> None:
    install(home, ["git"], interpreter)
    env = {**home.env, "PATH": "/usr/bin:/bin:" + str(home.loc.shim_dir)}
    res = run(
        home,
        ["sh", "-c", 'echo "$MCPSHIM_SESSION"; echo "$PATH"; git --version'],
        env=env,
        capture_output=True,
    )
    assert res.returncode == 0, res.stderr
    session_line, path_line, git_line = res.stdout.decode().splitlines()
    sid = only_session(home)
    assert session_line == sid
    assert path_line.split(":")[0] == str(home.loc.shim_dir)
    assert path_line.split(":").count(str(home.loc.shim_dir)) == 1
    assert git_line.startswith("git version")
    [rec] = [r for r in home.execs() if r.shim == "git"]
    assert rec.session == sid
    [start] = events(home, "session-start")
    assert start["path"] == path_line


def test_session_records_schema_and_no_credential_values(home: Home, tmp_path: Path) -> None:
    secret = "hunter2-Value-That-Must-Not-Leak"
    env = {**home.env, "MY_API_TOKEN": secret, "DB_PASSWORD": secret, "PLAIN": secret}
    token = "ghp_" + "A" * 36
    res = run(home, ["sh", "-c", "sleep 0.5; exit 3", "x", token], "--name", "demo", env=env)
    assert res.returncode == 3
    [start] = events(home, "session-start")
    keys = "session time name command cwd user uid pid child_pid child_start boot_id path"
    for key in [*keys.split(), "credential_env", "subreaper", "platform"]:
        assert key in start, key
    assert start["name"] == "demo"
    assert start["command"][:3] == ["sh", "-c", "sleep 0.5; exit 3"]
    assert start["command"][4] == "ghp_[REDACTED:github-token]"
    assert start["cwd"] == os.getcwd()
    assert start["uid"] == os.getuid()
    assert start["subreaper"] is True
    assert isinstance(start["child_start"], int)
    assert {"MY_API_TOKEN", "DB_PASSWORD"} <= set(start["credential_env"])
    assert "PLAIN" not in start["credential_env"]
    assert all(is_credential_name(n) for n in start["credential_env"])
    [end] = events(home, "session-end")
    assert end["exit_status"] == 3
    assert end["survivors"] == 0 and end["terminated"] is False
    assert end["duration_s"] >= 0.5  # the command slept 0.5 s: no shorter session
    raw = b"".join(p.read_bytes() for p in home.loc.log_dir.glob("exec.log*"))
    assert secret.encode() not in raw and token.encode() not in raw
    for ev in events(home):
        assert ev["session"] == start["session"] and ev["time"].endswith("+00:00")


def test_command_not_found_is_127(home: Home) -> None:
    res = run(home, ["no-such-command-mcpshim"], capture_output=True)
    assert res.returncode == 127
    assert b"no-such-command-mcpshim" in res.stderr and b"Traceback" not in res.stderr


@pytest.mark.parametrize(
    "opts", [(), ("--no-trace",), ("--mcp",)], ids=["default", "untraced", "mcp"]
)
def test_a_server_path_that_does_not_exist_is_127_traced_or_not(
    home: Home, opts: tuple[str, ...]
) -> None:
    # Issue 41 item 9: traced, strace said "Can't stat" and run exited 1; untraced it was
    # 127 with mcpshim's message, and `sessions` called either attempt lost, a session by
    # hand. One status, one message, and the session says the server did not start.
    install(home, ["git"])
    res = run(home, ["/nonexistent/server"], *opts, capture_output=True, stdin=subprocess.DEVNULL)
    assert res.returncode == 127
    errors = [x for x in res.stderr.decode().splitlines() if "warning" not in x]
    assert errors == ["mcpshim: error: /nonexistent/server: No such file or directory"]
    [end] = events(home, "session-end")
    assert end["exit_status"] == 127 and end["cause"] == "not-started"
    assert end["reason"] == "/nonexistent/server: No such file or directory"
    listed = subprocess.run(
        [sys.executable, "-m", "mcpshim", "sessions", "--dir", str(home.loc.shim_dir),
         "--format", "json"],
        env=home.env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    [session] = json.loads(listed.stdout)["sessions"]
    assert session["exit_status"] == 127 and session["cause"] == "not-started"
    assert session["supervised"] and session["command"] == ["/nonexistent/server"]
    assert not list((home.loc.log_dir / "trace").glob("run-*"))  # nothing of a trace left


def test_run_needs_a_command(home: Home) -> None:
    res = run(home, [], capture_output=True)
    assert res.returncode == 2
    assert b"Traceback" not in res.stderr


def test_run_help_explains() -> None:
    res = subprocess.run([sys.executable, "-m", "mcpshim", "run", "--help"], capture_output=True,
                         check=True)  # fmt: skip
    for word in (b"--on-exit", b"--grace", b"--sample-ms", b"MCPSHIM_SESSION", b"subreaper"):
        assert word in res.stdout
