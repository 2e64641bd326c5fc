"""Approval that lives with real servers (issue 30 item 1): a server whose tool description
lists a Python set reorders it at every start. Approved once, three restarts under other
hash seeds, reviewed with the lock, show nothing at medium or above (an info says it was
only the order), and under --enforce their calls are answered; a drift that adds a word or
a parameter is still high and refused, shown as a diff, and `approve --update` accepts it
after showing that diff on the card.

The real servers are mcp-shell-server and cli-mcp-server from PyPI, pinned
(tests/fixtures/pyservers.py); the fixture server (official SDK) adds the parameter.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from mcpshim.cli import cli
from mcpshim.contract.lockfile import load_lock
from tests.fixtures.approvescenario import run_mcp
from tests.fixtures.home import FIXTURES, Home, install
from tests.fixtures.pyservers import servers_bin
from tests.fixtures.runhelp import events

SEEDS = ("11", "22", "33")
COMMANDS = "git,cat,sh,echo,ls"
SEVERE = ("medium", "high")


def _cli(home: Home, *args: str) -> Any:
    argv = [args[0], "--dir", str(home.loc.shim_dir), *args[1:]]
    done = CliRunner().invoke(cli, argv, catch_exceptions=False, standalone_mode=False)
    done.exit_code = done.return_value or 0
    return done


def _review(home: Home, sid: str, lock: Path) -> list[dict[str, Any]]:
    done = _cli(home, "review", "--session", sid, "--lock", str(lock), "--format", "json")
    found: list[dict[str, Any]] = json.loads(done.stdout)["findings"]
    return found


def _session(
    home: Home, argv: list[str], tool: str, args: dict[str, Any], env: dict[str, str], *opts: str
) -> tuple[str, str, str]:
    """(session id, the tool's description as listed, the call's answer or its error)."""

    async def script(s: ClientSession) -> tuple[str, str]:
        listed = await s.list_tools()
        desc = next(t.description or "" for t in listed.tools if t.name == tool)
        try:
            r = await s.call_tool(tool, args)
            text = "ok: " + str(r.content[0].text if r.content else "")  # type: ignore[union-attr]
        except MCPError as exc:
            text = f"error {exc.error.code}: {exc.error.message}"
        await anyio.sleep(0.1)
        return desc, text

    sid, (desc, answer) = run_mcp(home, argv, script, *opts, env=env)
    return sid, desc, answer


def _hold_to_the_lock(
    home: Home, lock: Path, argv: list[str], tool: str, args: dict[str, Any], env: dict[str, str]
) -> str:
    """Approve one session, then restart it under three other seeds with the lock."""
    first, desc0, answer = _session(home, argv, tool, args, {**env, "PYTHONHASHSEED": "1"})
    assert answer.startswith("ok: "), answer
    assert _cli(home, "approve", "--session", first, "--lock", str(lock), "--yes").exit_code == 0
    orders = {desc0}
    for seed in SEEDS:
        env_seed = {**env, "PYTHONHASHSEED": seed}
        opts = ("--lock", str(lock), "--enforce")
        sid, desc, answer = _session(home, argv, tool, args, env_seed, *opts)
        orders.add(desc)
        assert answer.startswith("ok: "), (seed, answer)  # answered, not refused
        assert not events(home, "mcp-refused", sid)
        found = _review(home, sid, lock)
        assert [f for f in found if f["severity"] in SEVERE] == [], found
        if desc != desc0:
            [info] = [f for f in found if f["rule"] == "MCS520"]
            assert info["severity"] == "info" and "in another order" in info["message"]
            assert "the same words, in another order" in info["evidence"][0]["text"]
        done = _cli(home, "review", "--session", sid, "--lock", str(lock))
        assert done.exit_code == 0, done.stdout
    assert len(orders) > 1, orders  # the seeds did reorder the description
    return first


REAL: dict[str, tuple[str, str, dict[str, Any]]] = {
    "mcp-shell-server": ("ALLOW_COMMANDS", "shell_execute", {"command": ["echo", "hi"]}),
    "cli-mcp-server": ("ALLOWED_COMMANDS", "run_command", {"command": "echo hi"}),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_a_real_server_that_reorders_a_set_is_approved_once(
    home: Home, tmp_path: Path, name: str
) -> None:
    var, tool, args = REAL[name]
    argv = [str(servers_bin() / name)]
    work = tmp_path / "work"
    work.mkdir()
    env = {var: COMMANDS, "ALLOWED_DIR": str(work)}
    install(home, ["git", "sh"])
    lock = tmp_path / "mcpshim.lock"
    _hold_to_the_lock(home, lock, argv, tool, args, env)
    # One more allowed command is a new word, not a new order: high, refused.
    env_more = {**env, var: COMMANDS + ",rm", "PYTHONHASHSEED": "1"}
    sid, desc, answer = _session(home, argv, tool, args, env_more, "--lock", str(lock), "--enforce")
    assert "rm" in desc and answer.startswith("error -32001: mcpshim: tool"), answer
    [drift] = [f for f in _review(home, sid, lock) if f["rule"] == "MCS520"]
    assert drift["severity"] == "high" and "it adds description words rm" in drift["message"]
    assert "description: words added: rm" in drift["evidence"][0]["text"]


def test_a_new_parameter_is_refused_then_accepted_with_approve_update(
    home: Home, tmp_path: Path
) -> None:
    argv = [sys.executable, str(FIXTURES / "mcp_drift_server.py")]
    env = {"FIXTURE_SET": COMMANDS}
    install(home, ["git"])
    lock = tmp_path / "mcpshim.lock"
    _hold_to_the_lock(home, lock, argv, "lookup", {"what": "x"}, env)
    before = lock.read_bytes()
    # The tool grows a parameter: a drift that adds capability keeps its severity.
    wider = {**env, "FIXTURE_SCOPE": "1", "PYTHONHASHSEED": "1"}
    opts = ("--lock", str(lock), "--enforce")
    sid, _desc, answer = _session(home, argv, "lookup", {"what": "x"}, wider, *opts)
    assert answer.startswith("error -32001: mcpshim: tool 'lookup' refused"), answer
    [drift] = [f for f in _review(home, sid, lock) if f["rule"] == "MCS520"]
    assert drift["severity"] == "high" and "it adds parameter scope" in drift["message"]
    assert '+ inputSchema parameter scope ("string")' in drift["evidence"][0]["text"]
    # Approving again shows the diff on the card but does not accept it without --update.
    done = _cli(home, "approve", "--session", sid, "--lock", str(lock), "--yes")
    assert done.exit_code == 1
    assert "drift from the lock:" in done.stdout and "parameter scope" in done.stdout
    assert "not accepted: `mcpshim approve --update` accepts it" in done.stderr
    assert lock.read_bytes() == before
    done = _cli(home, "approve", "--session", sid, "--lock", str(lock), "--update", "--yes")
    assert done.exit_code == 0, done.stderr
    assert "+ inputSchema parameter scope" in done.stdout  # shown before it was written
    assert "+ tool lookup: definition sha256:" in done.stderr
    approved = load_lock(lock).servers["mcpshim-drift-fixture"].tools["lookup"]
    assert "scope" in approved.definition and approved.order_sha256
    # Now the wider tool is the approved one, in any order.
    wider["PYTHONHASHSEED"] = "22"
    sid, _desc, answer = _session(home, argv, "lookup", {"what": "x"}, wider, *opts)
    assert answer.startswith("ok: x: git version"), answer
    assert [f for f in _review(home, sid, lock) if f["severity"] in SEVERE] == []
