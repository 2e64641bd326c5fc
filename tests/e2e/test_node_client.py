"""A client config entry as Claude Desktop, Cursor or VS Code hold it, wrapped by
wrap-config, then started by the official TypeScript SDK's stdio client (which gives the
server sockets, not pipes, and only its default environment), against a Node.js server
whose tool runs `git` through a shell: the tool call and the git it caused are recorded
and linked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mcpshim.family.attribution import attribute_log
from mcpshim.trace.probe import trace_unavailable
from tests.fixtures.home import NODE_FIXTURE, Home, install
from tests.fixtures.runhelp import events, poll

MCPSHIM_BIN = Path(sys.executable).parent / "mcpshim"
CLIENT = NODE_FIXTURE / "client.mjs"


def test_a_wrapped_entry_under_the_typescript_client(
    home: Home, node_server: Path, tmp_path: Path
) -> None:
    install(home, ["git"])
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "new-file").write_text("x")
    cfg = tmp_path / ".mcp.json"
    cfg.write_text(
        json.dumps({"mcpServers": {"node": {"command": "node", "args": [str(node_server)]}}})
    )
    wrap = subprocess.run(
        [str(MCPSHIM_BIN), "wrap-config", str(cfg), "--all"],
        env=home.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrap.returncode == 0, wrap.stderr
    entry = json.loads(cfg.read_text())["mcpServers"]["node"]
    assert entry["args"][:2] == ["run", "--mcp"]
    client = subprocess.run(
        ["node", str(CLIENT), json.dumps(entry), "git_status"],
        cwd=repo,
        env=home.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert client.returncode == 0, client.stderr
    out = json.loads(client.stdout)
    # What a Node client hands its server: sockets. The relay passes them on all the same.
    assert [fd.split(":")[0] for fd in out["fds"]] == ["socket", "socket"]
    assert out["results"] == [{"name": "git_status", "isError": False, "text": "?? new-file\nhi\n"}]
    poll(lambda: events(home, "session-end"), "session-end")
    [att] = attribute_log(home.loc)
    [call] = att.calls
    assert (call.method, call.name, call.is_error) == ("tools/call", "git_status", False)
    # The shell exec() started may have been sampled too (then git hangs below it).
    [git] = [n for n in att.nodes() if att.owner.get(n.id) == 0 and n.images[0].command == "git"]
    if trace_unavailable(None)[0] is not None:
        # Traced by default: the /bin/sh that Node's exec() started by absolute path is on
        # record too, the git it ran (through its shim) below it, both under the call.
        [top] = att.processes(0)
        line = [("sh", (b"-c", b"git status --short; echo hi"))]
        assert [(i.command, i.args) for i in top.images if i.source == "trace"] == line
        assert top.children == [git]
    assert [(i.command, i.args) for i in git.images] == [("git", (b"status", b"--short"))]
    assert {n.images[0].command for n in att.processes(0)} <= {"git", "dash", "sh", "bash"}
