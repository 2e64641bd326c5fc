"""mcpshim export otlp: recorded sessions as OpenTelemetry traces."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import click

from mcpshim.base.display import escape
from mcpshim.cli.common import load_policy, location_options, locations, session_option
from mcpshim.cli.common import session as resolve
from mcpshim.errors import InputError, McpshimError, UsageError
from mcpshim.family import attribution
from mcpshim.log import execlog, scope
from mcpshim.log.follow import Mark, mark
from mcpshim.log.logview import parse_since
from mcpshim.otel import sdk
from mcpshim.otel.collect import collect_traces
from mcpshim.paths import Locations
from mcpshim.shim.manifest import load_manifest

__all__ = ["COMMANDS"]


@click.group("export")
def export() -> None:
    """Send recorded sessions to the telemetry systems a team already runs."""


@export.command("otlp")
@location_options
@session_option("The session (default: the last session run with --mcp).")
@click.option("--since", help="Every --mcp session started since: ISO 8601 or 30s/10m/2h/7d.")
@click.option(
    "--endpoint",
    required=True,
    help="OTLP/HTTP endpoint, e.g. http://localhost:4318 (/v1/traces is added to a bare address).",
)
@click.option("--header", "headers", multiple=True, help="KEY=VALUE sent with each request.")
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML policy for the findings (as review takes it).",
)
@click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="Seconds to wait for the endpoint per request.")  # fmt: skip
def otlp(
    shim_dir: Path | None,
    log_dir: Path | None,
    session: str | None,
    since: str | None,
    endpoint: str,
    headers: tuple[str, ...],
    policy_file: Path | None,
    timeout: float,
) -> int:
    """Send sessions run with `mcpshim run --mcp` as OTLP traces (HTTP/protobuf).

    \b
    Each session is one trace: the session is the root span; each tools/call is a span
    `execute_tool TOOL` (GenAI and MCP semantic conventions), resources/read and
    prompts/get spans too; each process a call started is a child span (process.pid,
    process.command_args redacted, process.executable.path, process.working_directory,
    process.exit.code when a record says it) with the ECS entity id; findings are
    `mcpshim.finding` span events; an isError answer sets the span's status to error.
    Times are the records' own. Trace and span ids derive from the session and the
    records, so sending a session twice (or after `run --otlp`) repeats the same ids.

    Needs the optional extra: pip install 'mcpshim[otel]'.
    """
    if session is not None and since is not None:
        raise UsageError("--session and --since: give one")
    sdk.require()
    sdk.endpoint_url(endpoint)
    header_map = sdk.parse_headers(headers)
    loc = locations(shim_dir, log_dir)
    session = resolve(loc, session, relayed=True)
    after = parse_since(since) if since is not None else None
    # The export builds a few hundred thousand objects that all live until it is sent;
    # the cycle collector's passes over them free nothing and cost a fifth of its time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _export(loc, session, since, after, endpoint, header_map, policy_file, timeout)
    finally:
        if collecting:
            gc.enable()


def _export(
    loc: Locations,
    session: str | None,
    since: str | None,
    after: datetime | None,
    endpoint: str,
    header_map: dict[str, str],
    policy_file: Path | None,
    timeout: float,
) -> int:
    problems: list[execlog.LogProblem] = []
    if session is None and after is None:
        session = scope.latest_relayed(loc, problems)
        if session is None:
            raise InputError(f"no session run with --mcp in the log at {loc.log_dir}")
    traces = collect_traces(
        scope.records(loc, session, problems),
        policy=load_policy(policy_file),
        anchor=attribution.anchors_for(loc),
        host=socket.gethostname(),
        session=session,
        since=after,
        shim_dir=str(loc.shim_dir),
        manifest=load_manifest(loc.shim_dir),
    )
    for p in dict.fromkeys(problems):
        click.echo(f"mcpshim: {escape(p.where)}: {escape(p.message)}; skipped", err=True)
    if not traces:
        what = (
            f"session {session} was not run with --mcp" if session else "no session run with --mcp"
        )
        raise InputError(
            f"{what} in the log at {loc.log_dir}" + (f" since {since}" if since else "")
        )
    exporter = sdk.otlp_exporter(endpoint, header_map, timeout)
    try:
        sent, failed = sdk.export_traces(traces, exporter)
    finally:
        exporter.shutdown()
    url = escape(sdk.endpoint_url(endpoint))
    if failed:
        raise McpshimError(f"{url} did not take {failed} of {sent + failed} spans (see above)")
    click.echo(f"sent {sent} spans of {len(traces)} session(s) to {url}")
    return 0


@export.command("otlp-follow", hidden=True)
@location_options
@click.option("--session", required=True, help="The session to stream.")
@click.option(
    "--offset", type=click.IntRange(min=0), required=True, help="Where in exec.log it begins."
)
@click.option(
    "--inode",
    metavar="DEV:INO",
    help="The file exec.log was at --offset (without it: every segment is read).",
)
@click.option("--endpoint", required=True, help="The OTLP/HTTP endpoint.")
@click.option("--parent", type=int, required=True, help="The `run` that started this.")
def otlp_follow(
    shim_dir: Path | None, log_dir: Path | None, session: str, offset: int, inode: str | None,
    endpoint: str, parent: int,
) -> int:  # fmt: skip
    """`run --otlp`'s helper: stream SESSION's spans as its records arrive (otel.live)."""
    from mcpshim.otel.live import LiveStream

    loc = locations(shim_dir, log_dir)
    stream = LiveStream(
        loc,
        session,
        Mark(_ident(inode), offset),
        sdk.otlp_exporter(endpoint, {}, timeout=5.0),
        policy=load_policy(None),
        anchor=attribution.anchors_for(loc),
        host=socket.gethostname(),
        warn=lambda text: click.echo(f"mcpshim: warning: --otlp: {escape(text)}", err=True),
        manifest=load_manifest(loc.shim_dir),
        alive=lambda: os.getppid() == parent,
    )
    stream.run()
    return 0


def _ident(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    dev, sep, ino = text.partition(":")
    if not (sep and dev.isdigit() and ino.isdigit()):
        raise UsageError(f"--inode: expected DEV:INO, got {text!r}")
    return int(dev), int(ino)


def start_live_stream(loc: Locations, session: str, endpoint: str) -> int:
    """Start `run --otlp`'s live stream (a process of its own, its stdout not the MCP
    channel's); returns its pid. It reads from where the log stands now, before the
    session's first record, whatever rotations come before it starts."""
    at = mark(loc)
    where = ["--offset", str(at.offset)]
    if at.ident is not None:
        where += ["--inode", f"{at.ident[0]}:{at.ident[1]}"]
    argv = [sys.executable, "-m", "mcpshim", "export", "otlp-follow", "--dir", str(loc.shim_dir),
            "--log-dir", str(loc.log_dir), "--session", session, *where,
            "--endpoint", endpoint, "--parent", str(os.getpid())]  # fmt: skip
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
    )
    return proc.pid


COMMANDS = [export]
