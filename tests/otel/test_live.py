"""`run --otlp`'s live stream reads the session back from the log through log.follow's
follower: what it sends a real OTLP receiver is the whole session, however many rotations
fall between two of its reads."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcpshim.log import rotation
from mcpshim.otel.sdk import export_traces
from tests.fixtures.home import Home, install
from tests.fixtures.mcpscenario import SHIMS, TOOLS, quiet_npm_env
from tests.fixtures.otelscenario import MCPSHIM, by_name, followers, traces_of, wait_followers
from tests.fixtures.otlp_receiver import Received, receiver
from tests.fixtures.runhelp import events, poll, stopped


def _ids(spans: list[dict[str, object]]) -> set[int]:
    return {int(str(s["span_id"]), 16) for s in spans}


async def _until(what: str, check: object) -> None:
    with anyio.fail_after(60):
        while not check():  # type: ignore[operator]
            await anyio.sleep(0.1)


def _session(home: Home, got: Received) -> str:
    """A session whose second git_version call, and the git it ran, are written while the
    stream is stopped (SIGSTOP) between a rotation before them and one after them."""
    install(home, SHIMS)
    run = ["run", "--dir", str(home.loc.shim_dir), "--mcp", "--on-exit", "terminate",
           "--grace", "1", "--otlp", got.url, "--", sys.executable, str(TOOLS)]  # fmt: skip
    params = StdioServerParameters(
        command=MCPSHIM[0], args=[*MCPSHIM[1:], *run], env=quiet_npm_env(home.env)
    )
    sid: list[str] = []

    async def drive() -> None:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            assert not (await s.call_tool("git_version", {})).is_error
            sid.append(str(events(home, "session-start")[0]["session"]))
            # the stream is reading: the first call's span went out when it answered
            await _until("a span", lambda: "execute_tool git_version" in by_name(got.spans()))
            [stream] = followers(sid[0])
            with stopped(stream):
                rotation.rotate(home.loc)  # the log the stream holds is a segment now
                assert not (await s.call_tool("git_version", {})).is_error
                rotation.rotate(home.loc)  # and so is the one the second call went into
            assert (await s.call_tool("no_such_tool", {})).is_error

    anyio.run(drive)
    poll(lambda: events(home, "session-end", sid[0]), "session-end")
    return sid[0]


def test_the_live_stream_survives_two_rotations_between_two_reads(home: Home) -> None:
    with receiver() as got:
        sid = _session(home, got)
        wait_followers(sid)
        live = got.spans()
    mem = InMemorySpanExporter()
    export_traces(traces_of(home, sid), mem)
    exported = {s.context.span_id for s in mem.get_finished_spans()}
    names = by_name(live)
    assert len(names["execute_tool git_version"]) == 2 and len(names["git"]) == 2
    assert _ids(live) == exported and len(live) == len(exported)  # all of it, each once
    assert len(list(home.loc.log_dir.glob("exec.log.0*"))) == 2


def test_a_stream_started_after_rotations_reads_from_where_the_session_began(
    home: Home, tmp_path: Path
) -> None:
    """The helper's own start-up can take longer than the log takes to rotate: it is
    told where the log stood (file and offset), not just an offset."""
    from click.testing import CliRunner

    from mcpshim.cli import cli
    from mcpshim.log import eventlog, follow

    home.loc.log_dir.mkdir(parents=True)
    eventlog.append_event(home.loc, "before", {"time": "2026-01-01T00:00:00+00:00"})
    at = follow.mark(home.loc)
    assert at.ident is not None
    sid = "20260101T000001Z-live"

    def note(kind: str, second: int, **data: object) -> None:
        when = f"2026-01-01T00:00:0{second}+00:00"
        eventlog.append_event(home.loc, kind, {"session": sid, "time": when, **data})

    note("mcp-session", 1)
    note("session-start", 1, command=["srv"])
    rotation.rotate(home.loc)  # the marked file is a segment now
    note("mcp-request", 2, direction="client->server", id=1, method="tools/call", tool="echo")
    rotation.rotate(home.loc)
    note("mcp-response", 3, direction="server->client", id=1)
    note("session-end", 4, exit_status=0)
    with receiver() as got:
        argv = ["export", "otlp-follow", "--dir", str(home.loc.shim_dir), "--log-dir",
                str(home.loc.log_dir), "--session", sid, "--offset", str(at.offset), "--inode",
                f"{at.ident[0]}:{at.ident[1]}", "--endpoint", got.url,
                "--parent", str(os.getppid())]  # fmt: skip
        done = CliRunner().invoke(cli, argv, standalone_mode=False, catch_exceptions=False)
        assert done.return_value == 0, done.output
        names = by_name(got.spans())
    assert set(names) == {"session srv", "execute_tool echo"}, names
