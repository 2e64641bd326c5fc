"""wrap-config under load: concurrent runs on one file, and a config with many servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpshim.cli import main
from mcpshim.pathcheck.clientconfig import load_config
from mcpshim.pathcheck.wrapfile import LOCK_SUFFIX, backup_path
from tests.fixtures.home import SRC


def _config(path: Path, n: int, pad: int = 0) -> bytes:
    servers = {
        f"s{i}": {"command": "npx", "args": ["-y", f"pkg-{i}@1.0.0"], "env": {"X": "y" * pad}}
        for i in range(n)
    }
    raw = json.dumps({"mcpServers": servers}, indent=2).encode()
    path.write_bytes(raw)
    return raw


def test_concurrent_runs_on_one_file_keep_every_change(tmp_path: Path) -> None:
    """Real processes, released at once: each re-reads the file under the lock, so the
    last writer's file holds every earlier change (before the lock, one was lost)."""
    path = tmp_path / "claude_desktop_config.json"
    original = _config(path, 400, pad=200)  # a plan takes long enough for runs to overlap
    go = tmp_path / "go"
    n = 6
    code = (
        "import os, sys, time\n"
        "from mcpshim.cli import main\n"
        f"while not os.path.exists({str(go)!r}):\n"
        "    time.sleep(0.002)\n"
        "main(sys.argv[1:])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, "wrap-config", str(path), "--server", f"s{i}",
             "--dir", str(tmp_path / "shims")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(n)
    ]  # fmt: skip
    time.sleep(2.0)  # every interpreter is up and waiting
    go.touch()
    for i, p in enumerate(procs):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert f"wrapped s{i}:" in out
    cfg = load_config(path)
    wrapped = [s.name for s in cfg.servers if s.args[:1] == ("run",)]
    assert sorted(wrapped) == sorted(f"s{i}" for i in range(n))
    assert backup_path(path).read_bytes() == original
    # its last holder removed it; a waiter that held an unlinked one locked the new file
    assert not (tmp_path / (path.name + LOCK_SUFFIX)).exists()


@pytest.mark.alone
def test_wrap_all_is_linear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """10,000 servers: seconds of CPU (before: the edits were applied one string copy each,
    and every server's line number was a count from the top; minutes)."""
    d = tmp_path / ".vscode"
    d.mkdir()
    path = d / "mcp.json"
    _config(path, 10_000)
    t0 = time.process_time()
    with pytest.raises(SystemExit) as done:
        main(["wrap-config", str(path), "--all", "--dir", str(tmp_path / "shims")])
    cpu = time.process_time() - t0
    assert done.value.code == 0
    assert capsys.readouterr().out.count("\nwrapped ") == 10_000 - 1
    assert cpu < 20, f"wrap-config --all on 10,000 servers took {cpu:.1f} s of CPU"
