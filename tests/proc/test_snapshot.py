"""`mcpshim snapshot PID` on a real process family."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpshim.proc.procinfo import start_ticks
from tests.fixtures.home import Home
from tests.fixtures.runhelp import MCPSHIM, poll

TOKEN = "ghp_" + "B" * 36


@pytest.fixture
def family(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """sh -> (sleep, python holding a listening socket and a file), with odd argv bytes."""
    ready = tmp_path / "ready"
    held = tmp_path / "held.txt"
    py = (
        "import socket, sys, time\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
        f"f = open({str(held)!r}, 'w')\n"
        f"open({str(ready)!r}, 'w').write(str(s.getsockname()[1]))\n"
        "time.sleep(120)\n"
    )
    script = f'sleep 120 & {sys.executable} -c "$1" --token {TOKEN} "$2"; wait'
    proc = subprocess.Popen(["sh", "-c", script, "sh", py, "a\x1b[31mred\udcff"])
    poll(lambda: ready.exists() and ready.read_text(), "the family to start")
    yield proc
    subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)
    proc.kill()
    proc.wait()


def snapshot(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MCPSHIM, "snapshot", *args], capture_output=True, text=True,
                          env=env, check=False)  # fmt: skip


def test_json_snapshot_of_a_family(family: subprocess.Popen[bytes], tmp_path: Path) -> None:
    out = tmp_path / "snap.json"
    res = snapshot(str(family.pid), "-o", str(out), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(out)
    doc = json.loads(out.read_text())
    assert doc["schema"] == "mcpshim.snapshot/1"
    assert doc["root"] == family.pid and doc["tool"]["name"] == "mcpshim"
    procs = {p["pid"]: p for p in doc["processes"]}
    root = procs[family.pid]
    assert root["depth"] == 0 and root["start_ticks"] == start_ticks(family.pid)
    assert root["start"].endswith("Z") and root["elapsed_s"] >= 0
    kids = [p for p in doc["processes"] if p["ppid"] == family.pid]
    assert {p["depth"] for p in kids} == {1}
    [sleeper] = [p for p in kids if p["cmdline"] == ["sleep", "120"]]
    assert sleeper["exe"].endswith("/sleep")
    [py] = [p for p in kids if p["cmdline"][:2] == [sys.executable, "-c"]]
    assert py["cmdline"][3:5] == ["--token", "[REDACTED:option-value]"]
    assert py["cmdline_b64"] == {"5": "YRtbMzFtcmVk/w=="}
    assert any(f["target"].endswith("held.txt") for f in py["files"])
    [sock] = py["sockets"]
    assert sock["status"] == "LISTEN" and sock["laddr"].startswith("127.0.0.1:")
    assert TOKEN not in out.read_text()


def test_text_snapshot_defaults_to_the_state_dir(
    family: subprocess.Popen[bytes], home: Home
) -> None:
    res = snapshot(str(family.pid), env=home.env)
    assert res.returncode == 0, res.stderr
    path = Path(res.stdout.strip())
    assert path.is_relative_to(home.root / ".local/state/mcpshim/snapshots")
    text = path.read_text()
    assert f"snapshot of pid {family.pid}" in text
    assert "\x1b" not in text  # terminal-safe
    assert "$'a\\e[31mred\\xff'" in text
    assert TOKEN not in text
    assert "sleep 120" in text and "LISTEN" in text


def test_snapshot_to_stdout_and_errors(family: subprocess.Popen[bytes]) -> None:
    res = snapshot(str(family.pid), "-o", "-")
    assert res.returncode == 0 and res.stdout.startswith(f"snapshot of pid {family.pid}")
    missing = snapshot("4194304")
    assert missing.returncode == 2 and "no process" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_snapshot_help() -> None:
    res = subprocess.run([*MCPSHIM, "snapshot", "--help"], capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert "lsof" in res.stdout and "--format" in res.stdout
