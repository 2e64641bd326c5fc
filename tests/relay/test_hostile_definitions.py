"""A hostile server's definitions cannot stall `run --mcp` (issue 41 item 1): a tool whose
description is 10 MB of one word is listed, recorded and enforced like any other, and every
process `run` starts ends with it, a recorder that stopped working included.

The hashes and diffs themselves are held linear in tests/contract/test_canon.py; these run
the real `mcpshim run --mcp` with a server written by hand (tests/fixtures/hostile_server.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import psutil

from mcpshim.contract.canon import definition_hash
from tests.fixtures.approvescenario import MCPSHIM
from tests.fixtures.home import Home, install
from tests.fixtures.rawclient import HOSTILE, RawClient, new_session
from tests.fixtures.runhelp import events, poll

BIG = 10 << 20  # a 10 MB description: one word, no separator


def _call(client: RawClient, msg_id: int, how: str) -> dict[str, Any]:
    client.send({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                 "params": {"name": "abuse", "arguments": {"how": how}}})  # fmt: skip
    return client.answer(msg_id)


def _session(home: Home, *opts: str, env: dict[str, str] | None = None) -> str:
    """One session: initialize, tools/list, one call; its id once it ended."""
    before = {e["session"] for e in events(home, "session-start")}
    client = RawClient(home, *opts, server=HOSTILE, env=env)
    try:
        client.start()
        assert _call(client, 3, "hi")["result"]["content"][0]["text"] == "hi"
    finally:
        assert client.close() == 0
    sid = new_session(home, before)
    poll(lambda: events(home, "session-end", sid), "the end")
    return sid


def test_a_10mb_description_is_recorded_and_enforced(home: Home, tmp_path: Path) -> None:
    install(home, ["git"])
    env = {"FIXTURE_DESCRIPTION_BYTES": str(BIG)}
    sid = _session(home, env=env)
    # The recorder hashed it (before: 100 % CPU for over 15 minutes, and the session's later
    # records never written) and recorded the call after it.
    [listed] = poll(lambda: events(home, "mcp-tools", sid), "the listing")
    [tool] = listed["tools"]
    schema = {"type": "object", "properties": {"how": {"type": "string"}}}
    item = {"name": "abuse", "description": "x" * BIG, "inputSchema": schema}
    assert tool["sha256"] == definition_hash("tool", item)
    assert poll(lambda: events(home, "mcp-response", sid), "the answer")[0]["id"] == 3
    # Under --enforce the gate hashes the listing before passing it on (a 30 KB description
    # delayed tools/list by 20 s): the approved tool is listed and called.
    lock = tmp_path / "mcpshim.lock"
    done = subprocess.run(
        [*MCPSHIM, "approve", "--dir", str(home.loc.shim_dir), "--session", sid,
         "--lock", str(lock), "--yes"],
        env=home.env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    enforced = _session(home, "--lock", str(lock), "--enforce", env=env)
    assert not events(home, "mcp-refused", enforced)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _recorder(run: int) -> int:
    def found() -> int | None:
        kids = psutil.Process(run).children()
        return next((k.pid for k in kids if k.name() == "mcpshim-record"), None)

    return poll(found, "the recorder")


def test_a_recorder_that_stopped_working_ends_with_run(home: Home, tmp_path: Path) -> None:
    install(home, ["git"])
    err = tmp_path / "stderr"
    with err.open("wb") as stderr:
        client = RawClient(home, server=HOSTILE, stderr=stderr)
        try:
            client.start()
            recorder = _recorder(client.proc.pid)
            os.kill(recorder, signal.SIGSTOP)  # it will never make progress again
            assert _call(client, 3, "hi")["result"]["content"][0]["text"] == "hi"
        finally:
            assert client.close() == 0  # before: run left it stopped, holding stderr, for good
    assert _gone(recorder)
    text = err.read_text()
    assert f"the recorder (pid {recorder}) did nothing for 10 s and was ended" in text, text


def test_a_recorder_ends_when_run_is_killed(home: Home) -> None:
    install(home, ["git"])
    client = RawClient(home, server=HOSTILE)
    try:
        client.start()
        recorder = _recorder(client.proc.pid)
        os.kill(recorder, signal.SIGSTOP)
        client.proc.kill()  # SIGKILL: the watcher ends the family, then mcpshim's helpers
        client.proc.wait(60)
        poll(lambda: _gone(recorder), "the recorder's end")
    finally:
        if client.proc.stdin is not None:
            client.proc.stdin.close()


def test_sigterm_gives_the_recorder_a_grace_then_ends_it(home: Home) -> None:
    install(home, ["git"])
    client = RawClient(home, server=HOSTILE)
    try:
        client.start()
        recorder = _recorder(client.proc.pid)
        os.kill(recorder, signal.SIGTERM)  # before: ignored
        poll(lambda: _gone(recorder), "the recorder's end")
        # the relay goes on: the bytes never passed through the recorder
        assert _call(client, 3, "hi")["result"]["content"][0]["text"] == "hi"
    finally:
        assert client.close() == 0
