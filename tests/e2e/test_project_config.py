"""A program the project's configuration chose (issue 40: MCS107 from file evidence). A real
SDK server reads ./tool.json at start, as language-server bridges read theirs, and its
`build` tool runs the command that file names; its `version` tool runs git, its own choice.
Under the real `mcpshim run --mcp --trace-files`, in the checkout, the tracer records both
programs with the read before them, and review says under the build call that the server
read the project's configuration and then ran that program, naming tool.json with its
SHA-256; git, which tool.json does not name, is no finding. A
configuration outside the workspace (the user's own), a program of the server's own
installation, and a session without file tracing say nothing of it."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession

from tests.fixtures.approvescenario import run_mcp
from tests.fixtures.home import FIXTURES, Home
from tests.fixtures.runhelp import command as mcpshim
from tests.fixtures.runhelp import events, needs_trace

SERVER = [sys.executable, str(FIXTURES / "mcp_tool_json_server.py")]
pytestmark = needs_trace


async def _version_then_build(s: ClientSession) -> list[str]:
    await s.list_tools()
    out = []
    for name in ("version", "build"):
        result = await s.call_tool(name, {})
        out.append(result.content[0].text if result.content else "")  # type: ignore[union-attr]
    return out


def _checkout(tmp_path: Path, command: list[str]) -> Path:
    ws = tmp_path / "checkout"
    ws.mkdir(parents=True)
    (ws / "tool.json").write_text(json.dumps({"command": command}))
    return ws


def _review(home: Home, sid: str) -> dict[str, Any]:
    done = mcpshim(home, "review", "--session", sid, "--format", "json")
    worst = {f["severity"] for f in json.loads(done.stdout)["findings"]}
    assert done.returncode == (1 if worst & {"medium", "high"} else 0), done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def _chosen(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in doc["findings"] if f["rule"] == "MCS107"]


def test_a_program_the_checkouts_configuration_names(home: Home, tmp_path: Path) -> None:
    ws = _checkout(tmp_path, ["sh", "-c", "echo built"])
    sid, out = run_mcp(home, SERVER, _version_then_build, "--trace-files", cwd=ws)
    assert out[0].startswith("git version") and out[1] == "status 0: built", out
    doc = _review(home, sid)
    [found] = _chosen(doc)
    version_id, build_id = (c["id"] for c in doc["calls"])
    assert found["call"]["id"] == build_id and found["call"]["name"] == "build"
    assert (found["severity"], found["confidence"]) == ("medium", "inferred")
    digest = hashlib.sha256((ws / "tool.json").read_bytes()).hexdigest()
    m = re.fullmatch(r"(\S+) \(pid (\d+)\) read the project's configuration, then its child "
                     r"ran sh \(pid (\d+)\): (.*)", found["message"])  # fmt: skip
    assert m is not None, found["message"]
    assert m.group(1).startswith("python")
    assert m.group(4) == f"{ws}/tool.json (sha256 {digest[:12]})"
    [ev] = found["evidence"]
    assert ev["files"] == [{"path": f"{ws}/tool.json", "sha256": digest}]
    assert ev["reader"]["pid"] == int(m.group(2)) and ev["pid"] == int(m.group(3))
    # git ran after the same read, but tool.json does not name it: the server's own choice
    assert not [f for f in doc["findings"] if f.get("call", {}).get("id") == version_id
                and f["severity"] in ("medium", "high")]  # fmt: skip

    # the records: each program its children ran after the read, with the read (the tracer
    # reads no content; whether tool.json names the program is review's to say)
    recs = {Path(e["path"]).name: e for e in events(home, "trace-file", sid) if e.get("configured")}
    assert sorted(recs) == ["git", "sh"]
    for rec in recs.values():
        assert (rec["change"], rec["call"], rec["result"]) == ("run", "execve", "ok")
        assert rec["configured"]["paths"] == [f"{ws}/tool.json"]
        assert rec["configured"]["pid"] == int(m.group(2))

    text = mcpshim(home, "review", "--session", sid).stdout
    block = text.split(f"tools/call build (id {build_id})")[1]
    assert "[MEDIUM] MCS107 project-code-ran (inferred): python" in block
    ecs = mcpshim(home, "log", "--session", sid, "--format", "ecs").stdout
    file_docs = [d for d in map(json.loads, ecs.splitlines())
                 if d["event"]["dataset"] == "mcpshim.file"]  # fmt: skip
    assert [d["labels"]["mcpshim_file_kind"] for d in file_docs] == ["configured"] * 2
    assert all(d["message"].endswith(f"read the project's {ws}/tool.json") for d in file_docs)


def test_what_is_not_the_projects_choice(home: Home, tmp_path: Path) -> None:
    # the user's own configuration, outside the checkout: not the project's
    user = Path(home.env["HOME"]) / ".config" / "tool.json"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text(json.dumps({"command": ["sh", "-c", "echo built"]}))
    ws = tmp_path / "checkout"
    ws.mkdir()
    sid, out = run_mcp(home, SERVER, _version_then_build, "--trace-files", cwd=ws,
                       env={"TOOL_CONFIG": str(user)})  # fmt: skip
    assert out[1] == "status 0: built", out
    assert not _chosen(_review(home, sid))

    # a program of the server's own installation (a script of its directory), named by
    # the project: the server's own code, whoever chose to run it
    own = _checkout(tmp_path / "own", [sys.executable, str(FIXTURES / "__init__.py")])
    sid, out = run_mcp(home, SERVER, _version_then_build, "--trace-files", cwd=own)
    assert out[1] == "status 0: ", out
    assert not _chosen(_review(home, sid))

    # no file tracing (the default): nothing is known of the read
    ws = _checkout(tmp_path / "plain", ["sh", "-c", "echo built"])
    sid, out = run_mcp(home, SERVER, _version_then_build, cwd=ws)
    assert out[1] == "status 0: built", out
    doc = _review(home, sid)
    assert not _chosen(doc) and doc["coverage"][0]["files"]["status"] == "off"
