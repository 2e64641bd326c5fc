"""A real engine: Arize Phoenix takes the OTLP export of a real session and its REST API
gives the span tree back (session -> tool calls -> processes) with the attributes.

Phoenix is big and its dependencies are its own, so it lives in a venv of its own:
.venv-phoenix (scripts/system-deps.sh installs it in CI), or the `phoenix` executable named
by MCPSHIM_PHOENIX. Without one the test skips and says so.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcpshim.otel.sdk import export_traces
from tests.fixtures.home import REPO, Home
from tests.fixtures.otelscenario import MCPSHIM, run_session, traces_of

PHOENIX = Path(os.environ.get("MCPSHIM_PHOENIX") or REPO / ".venv-phoenix" / "bin" / "phoenix")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:  # localhost only
        return json.loads(resp.read())


@pytest.fixture
def phoenix(tmp_path: Path) -> Iterator[str]:
    if not os.access(PHOENIX, os.X_OK):
        pytest.skip(
            f"Arize Phoenix not installed at {PHOENIX} (CI installs it: scripts/system-deps.sh)"
        )
    port = _port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"),
           "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(_port()), "PHOENIX_TELEMETRY_ENABLED": "false"}  # fmt: skip
    log = (tmp_path / "phoenix.log").open("w")
    proc = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log, stderr=log,
                            start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 240  # imports and migrations: a minute on a loaded machine
        while True:
            assert proc.poll() is None, (tmp_path / "phoenix.log").read_text()[-3000:]
            try:
                if _get(f"{url}/v1/projects")["data"]:
                    break
            except OSError:
                pass
            assert time.monotonic() < end, "Phoenix did not start"
            time.sleep(1)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def test_phoenix_reads_back_the_session_tree(phoenix: str, home: Home, tmp_path: Path) -> None:
    sid = run_session(home, tmp_path, None)
    for _ in range(2):  # twice: the same ids, so Phoenix keeps one of each
        done = subprocess.run(
            [*MCPSHIM, "export", "otlp", "--dir", str(home.loc.shim_dir), "--session", sid,
             "--endpoint", phoenix],
            env=home.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    mem = InMemorySpanExporter()
    export_traces(traces_of(home, sid), mem)
    expected = {f"{s.context.span_id:016x}" for s in mem.get_finished_spans()}
    end = time.monotonic() + 60
    while True:
        spans = _get(f"{phoenix}/v1/projects/default/spans?limit=1000")["data"]
        if len(spans) >= len(expected) or time.monotonic() > end:
            break
        time.sleep(1)
    assert {s["context"]["span_id"] for s in spans} == expected
    assert len(spans) == len(expected)  # the second export repeated the ids
    by_id = {s["context"]["span_id"]: s for s in spans}
    named = {s["name"]: s for s in spans}

    def parent(name: str) -> str:
        return str(by_id[named[name]["parent_id"]]["name"])

    [root] = [s for s in spans if not s["parent_id"]]
    assert root["name"] == "session mcpshim-tools-fixture"
    assert root["attributes"]["mcp.session.id"] == sid
    for tool in ("run_test", "git_version", "no_such_tool"):
        call = named[f"execute_tool {tool}"]
        assert call["parent_id"] == root["context"]["span_id"]
        assert call["attributes"]["gen_ai.tool.name"] == tool
        assert call["attributes"]["gen_ai.operation.name"] == "execute_tool"
        assert call["attributes"]["mcp.method.name"] == "tools/call"
    assert named["execute_tool no_such_tool"]["status_code"] == "ERROR"
    assert parent("npm") == "execute_tool run_test" and parent("git") == "execute_tool git_version"
    # a span per exec: two are node's (npm's own `#!/usr/bin/env node`, and sh -c's), so by
    # their edges: sh -c's node under its sh, the helper sleep under that node
    edges = {(s["name"], by_id[s["parent_id"]]["name"]) for s in spans if s["parent_id"]}
    assert ("node", "sh") in edges and [p for n, p in edges if n == "sleep"] == ["node"], edges
    npm = named["npm"]["attributes"]
    assert npm["process.command_args"] == ["npm", "test", "--silent"]
    assert npm["process.working_directory"] == str(tmp_path / "pkg")
    assert len(npm["mcpshim.process.entity_id"]) == 32
    rules = {e["attributes"]["mcpshim.finding.rule.id"] for e in named["npm"]["events"]}
    assert "MCS107" in rules
    assert {e["name"] for e in named["npm"]["events"]} == {"mcpshim.finding"}
