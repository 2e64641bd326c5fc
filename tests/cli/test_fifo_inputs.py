"""Every file mcpshim reads is refused when it is not a regular file (issue 41 item 6), as
every file it writes already is: a FIFO at `approve --lock`, `review --lock`, `run --lock
... --enforce`, a policy, a baseline, a verifier or the wrap-config backup made the command
block for good. Now each says so in one line and exits 2. The real CLI, with a timeout
that a command blocked on a FIFO runs into."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.approvescenario import MCPSHIM
from tests.fixtures.home import Home, install
from tests.fixtures.rawclient import HOSTILE, RawClient, new_session
from tests.fixtures.runhelp import events, poll


def _cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [*MCPSHIM, args[0], "--dir", str(home.loc.shim_dir), *args[1:]]
    return subprocess.run(argv, env=home.env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=False)  # fmt: skip


def _session(home: Home) -> str:
    before = {e["session"] for e in events(home, "session-start")}
    client = RawClient(home, server=HOSTILE)
    try:
        client.start()
    finally:
        assert client.close() == 0
    sid = new_session(home, before)
    poll(lambda: events(home, "session-end", sid), "the end")
    return sid


def test_a_fifo_where_a_file_is_read_is_refused(home: Home, tmp_path: Path) -> None:
    install(home, ["git"])
    sid = _session(home)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {"s": {"command": "node", "args": ["s.js"]}}}))
    os.mkfifo(tmp_path / "claude_desktop_config.json.mcpshim-backup")
    server = [sys.executable, str(HOSTILE[1])]
    cases = {
        "approve --lock": ["approve", "--session", sid, "--lock", str(fifo), "--yes"],
        "review --lock": ["review", "--session", sid, "--lock", str(fifo)],
        "report --lock": ["report", "--session", sid, "--lock", str(fifo), "-o",
                          str(tmp_path / "r.html")],
        "run --lock --enforce": ["run", "--mcp", "--lock", str(fifo), "--enforce", "--",
                                 *server],
        "review --policy": ["review", "--policy", str(fifo)],
        "review --baseline": ["review", "--baseline", str(fifo)],
        "log verify --key": ["log", "verify", "--key", str(fifo)],
        "wrap-config (its backup)": ["wrap-config", "--all", str(config)],
    }  # fmt: skip
    for label, args in cases.items():
        done = _cli(home, *args)  # before: blocked in open() for good (the timeout)
        assert done.returncode == 2, (label, done.returncode, done.stderr)
        assert "not a regular file" in done.stderr, (label, done.stderr)
        assert "Traceback" not in done.stderr, label
