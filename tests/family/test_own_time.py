"""A call owns what happens during it (issue 37), on real sessions: the SDK client drives the
tools fixture server through the real `mcpshim run --mcp`, traced. A terminal one call
opens runs a later call's command; the server fetches in its own process; a helper kept
between calls is the server's habit, not a call's departure."""

from __future__ import annotations

import http.server
import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession

from mcpshim.family.attribution import Attribution
from mcpshim.family.lifetimes import KEPT
from tests.fixtures.home import Home
from tests.fixtures.mcpscenario import attribution_of, git_repos, run_mcp_session
from tests.fixtures.runhelp import checkout_policy, command, needs_trace

pytestmark = needs_trace


def _text(result: Any) -> str:
    return str(result.content[0].text)


def _review(home: Home, session: str, *opts: str) -> dict[str, Any]:
    if "--policy" not in opts:
        opts = (*opts, *checkout_policy(home.root))
    done = command(home, "review", "--session", session, "--format", "json", *opts)
    assert done.returncode in (0, 1), done.stderr
    return dict(json.loads(done.stdout))


def _calls(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Review's call blocks by `tool #n` (n: which call of that tool)."""
    out: dict[str, dict[str, Any]] = {}
    for c in doc["calls"]:
        n = sum(1 for k in out if k.startswith(f"{c['name']} #")) + 1
        out[f"{c['name']} #{n}"] = c
    return out


def _node(att: Attribution, name: str) -> Any:
    [node] = [n for n in att.nodes() if n.images and n.current.command == name]
    return node


def test_a_later_call_owns_what_it_runs_in_an_earlier_call_s_terminal(
    home: Home, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()

    async def script(s: ClientSession) -> None:
        pid = int(_text(await s.call_tool("term_open", {"command": "bash"})))
        await anyio.sleep(0.5)
        line = f"cp /usr/bin/id {out}/x && {out}/x -u"
        got = _text(await s.call_tool("term_send", {"session": pid, "line": line}))
        assert got.strip().isdigit(), got
        await anyio.sleep(0.2)
        await s.call_tool("term_close", {"session": pid})

    session = run_mcp_session(home, script)
    att = attribution_of(home, session)
    assert [c.name for c in att.calls] == ["term_open", "term_send", "term_close"]
    bash, cp, x = _node(att, "bash"), _node(att, "cp"), _node(att, "x")
    assert att.owner[bash.id] == 0
    assert (att.owner[cp.id], att.owner[x.id]) == (1, 1)
    assert att.context[cp.id] == (0, bash) and att.context[x.id] == (0, bash)
    # bash outlived term_open, under the server, gone before the end: kept, not a departure
    assert att.outlived_kind[bash.id][0] == KEPT
    assert cp.id not in att.outlived and x.id not in att.outlived
    doc = _review(home, session)
    calls = _calls(doc)
    ran = calls["term_send #1"]["ran"]
    assert any(r.startswith("cp /usr/bin/id") and f"in bash (pid {bash.pid})" in r
               and "tools/call term_open" in r for r in ran), ran  # fmt: skip
    assert any(r.startswith(f"{out}/x -u") or r.startswith("x -u") for r in ran), ran
    assert not any(r.startswith("cp") for r in calls["term_open #1"]["ran"])
    # nothing at >= medium says term_open's bash outlived it; its kept helper is said once
    outlived = [f for f in doc["findings"] if f["rule"] == "MCS501"]
    assert [(f["severity"], f.get("call")) for f in outlived] == [("info", None)], outlived
    assert "keeps 1 helper process(es)" in outlived[0]["message"]
    # the copy run from a temporary directory is a finding of the call that ran it
    [temp] = [f for f in doc["findings"] if f["rule"] == "MCS102"]
    assert temp["call"]["name"] == "term_send" and "/x" in temp["message"], temp
    assert "tools/call term_open" in temp["evidence"][0]["text"]
    text = command(home, "review", "--session", session).stdout
    block = text[text.index("tools/call term_send") :]
    assert "cp /usr/bin/id" in block.split("tools/call term_close")[0]
    # the report's call sections and the approval cards say the same
    md = command(home, "report", "--session", session, "--format", "md", "-o", "-").stdout
    sections = {s.split("\n", 1)[0]: s for s in md.split("\n### ")[1:]}
    [send] = [v for k, v in sections.items() if "tools/call term\\_send" in k]
    [opened] = [v for k, v in sections.items() if "tools/call term\\_open" in k]
    assert "cp /usr/bin/id" in send and "cp /usr/bin/id" not in opened, md
    lock = tmp_path / "mcpshim.lock"
    cards = command(home, "approve", "--session", session, "--lock", str(lock), "--yes",
                    "--format", "md")  # fmt: skip
    assert cards.returncode == 0, cards.stderr
    by_tool = {c.split("\n", 1)[0]: c for c in re.split(r"\n#+ ", cards.stdout)}
    [send_card] = [v for k, v in by_tool.items() if k == "Tool `term_send`"]
    [open_card] = [v for k, v in by_tool.items() if k == "Tool `term_open`"]
    assert "/usr/bin/cp" in send_card and "/usr/bin/cp" not in open_card, cards.stdout


@pytest.fixture
def page_server() -> Iterator[int]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello")

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_server_s_own_connections_belong_to_the_call_in_flight(
    home: Home, page_server: int, tmp_path: Path
) -> None:
    port, closed = page_server, _closed_port()

    async def script(s: ClientSession) -> None:
        for _ in range(3):
            got = await s.call_tool("fetch", {"url": f"http://127.0.0.1:{port}/"})
            assert _text(got) == "hello"
            await anyio.sleep(0.1)
        last = _text(await s.call_tool("fetch", {"url": f"http://127.0.0.1:{closed}/"}))
        assert last.startswith("failed"), last

    session = run_mcp_session(home, script)
    policy = tmp_path / "p.toml"
    policy.write_text('[network]\nloopback = "medium"\n')
    doc = _review(home, session, "--policy", str(policy))
    calls = _calls(doc)
    for n in (1, 2, 3):
        block = calls[f"fetch #{n}"]
        said = " ".join(block["network"])
        assert f"connected to 127.0.0.1:{port} (tcp)" in said, block
        assert "in the server's own process" in said
        assert block["tried"] == []
    last = calls["fetch #4"]
    assert last["network"] == [] and f"127.0.0.1:{closed}" in " ".join(last["tried"])
    # the findings sit under the calls their blocks are in: one MCS306 per fetch
    reached = [f for f in doc["findings"] if f["rule"] == "MCS306"]
    assert sorted(f["call"]["time"] for f in reached) == sorted(
        calls[f"fetch #{n}"]["time"] for n in (1, 2, 3)
    )
    assert all(f"127.0.0.1:{port}" in f["message"] for f in reached)
    [tried] = [f for f in doc["findings"] if f["rule"] == "MCS307"]
    assert tried["call"]["time"] == last["time"]
    assert not [f for f in doc["findings"] if f["rule"] in ("MCS306", "MCS307") and not f["call"]]
    # the fetch tool's approval card lists where it went (it said "no socket was seen")
    lock = tmp_path / "mcpshim.lock"
    cards = command(home, "approve", "--session", session, "--lock", str(lock), "--yes",
                    "--format", "md")  # fmt: skip
    assert cards.returncode == 0, cards.stderr
    card = cards.stdout.split("Tool `fetch`", 1)[1].split("\n### ", 1)[0]
    assert f"127.0.0.1:{port}" in card, card
    md = command(home, "report", "--session", session, "--format", "md", "-o", "-").stdout
    assert md.count(f"connected to 127.0.0.1:{port}") >= 3, md


def test_a_helper_kept_between_calls_is_the_server_s_said_once(home: Home, tmp_path: Path) -> None:
    [repo] = git_repos(tmp_path, 1)

    async def script(s: ClientSession) -> None:
        await s.call_tool("keep_helper", {"repo": str(repo)})
        await anyio.sleep(0.3)
        await s.call_tool("git_version", {})
        await anyio.sleep(0.1)
        await s.call_tool("drop_helper", {})

    session = run_mcp_session(home, script)
    att = attribution_of(home, session)
    helper = next(n for n in att.nodes() if n.images and n.current.args[:1] == (b"cat-file",))
    assert att.owner[helper.id] == 0
    assert att.outlived_kind[helper.id][0] == KEPT
    doc = _review(home, session)
    assert not [f for f in doc["findings"] if f["severity"] in ("medium", "high")], doc["findings"]
    [kept] = [f for f in doc["findings"] if f["rule"] == "MCS501"]
    assert kept["severity"] == "info" and "git" in kept["message"]


def test_a_detached_helper_still_outlives_its_call_at_medium(home: Home) -> None:
    async def script(s: ClientSession) -> None:
        await s.call_tool("shell", {"line": "sleep 2 >/dev/null 2>&1 &"})
        await anyio.sleep(0.5)

    session = run_mcp_session(home, script, None, "--on-exit", "terminate", "--grace", "0.2")
    att = attribution_of(home, session)
    sleep = _node(att, "sleep")
    assert att.owner[sleep.id] == 0
    kind, why = att.outlived_kind[sleep.id]
    assert kind in ("detached", "survived"), why
    doc = _review(home, session)
    [f] = [f for f in doc["findings"] if f["rule"] == "MCS501"]
    assert f["severity"] == "medium" and f["call"]["name"] == "shell" and "sleep" in f["message"]


@pytest.mark.parametrize("opts", [(), ("--no-trace",)], ids=["traced", "untraced"])
def test_a_helper_ended_as_the_server_shut_down_is_kept_not_detached(
    home: Home, opts: tuple[str, ...]
) -> None:
    # The language server (sh and its sleep) outlives the calls that started it and is
    # signalled as the server exits: its sleep may outlive its shell by a moment, orphaned
    # as the family shuts down, after the last call. It escaped nothing: info, said once.
    async def script(s: ClientSession) -> None:
        await s.call_tool("lsp_definition", {"symbol": "add"})
        await anyio.sleep(0.2)
        await s.call_tool("lsp_references", {"symbol": "add"})
        # A client that closes at once races the relay's look at the family after the last
        # answer (it is taken as the answer is recorded, after it was passed on): untraced,
        # a shell gone before that look leaves no evidence of when it ended, and its orphan
        # is detached (design.md, limits). An agent's session outlasts its last answer.
        await anyio.sleep(0.3)

    # untraced, when a parent exited is known from its own reaped record, or for the
    # server, no earlier than its last answer
    session = run_mcp_session(home, script, None, *opts)
    att = attribution_of(home, session)
    sh = _node(att, "sh")
    assert att.outlived_kind[sh.id][0] == KEPT
    # its sleep, forked during the first call or just after it returned (the server's own
    # time then), is kept too wherever it is filed
    kinds = {kind for kind, _why in att.outlived_kind.values()}
    assert kinds == {KEPT}, att.outlived_kind
    doc = _review(home, session)
    assert not [f for f in doc["findings"] if f["severity"] in ("medium", "high")], doc["findings"]
    [kept] = [f for f in doc["findings"] if f["rule"] == "MCS501"]
    assert kept["severity"] == "info"
