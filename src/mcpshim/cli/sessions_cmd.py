"""mcpshim sessions: one line per session, newest first.

Its start-up imports the index and the CLI's light options only, never the review stack
(tests/cli/test_help.py holds the set): listing what was recorded needs no rule."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import click

from mcpshim.base.display import dumps, escape, quote_argv
from mcpshim.cli.options import format_option, location_options, locations
from mcpshim.log.sessions import SessionSummary, list_sessions

__all__ = ["COMMANDS"]

SCHEMA = "mcpshim.sessions/1"


def duration_text(s: SessionSummary) -> str:
    if s.running:
        return "running"
    d = s.duration_s
    if d is None:
        return "-"
    if d < 60:
        return f"{d:.1f}s"
    m, sec = divmod(int(d), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def mode_text(s: SessionSummary) -> str:
    parts = [p for p, on in (("mcp", s.relayed), ("trace", s.traced)) if on]
    if parts:
        return "+".join(parts)
    return "run" if s.supervised else "shims"


def _exit(s: SessionSummary) -> str:
    if s.exit_status is not None:
        return str(s.exit_status)
    if s.cause == "supervisor-lost":
        return "lost"
    return "-" if s.supervised else ""


def _line(s: SessionSummary, width: int, name_w: int) -> str:
    start = s.start.strftime("%Y-%m-%d %H:%M:%S") if s.start else "?"
    surv = "" if s.survivors is None else str(s.survivors)
    cmd = quote_argv(s.command) if s.command else "(no run: MCPSHIM_SESSION set by hand)"
    if s.cause == "not-started":
        cmd += f"  (did not start: {escape(s.reason) or 'the command could not be run'})"
    return (
        f"{escape(s.id):{width}} {start:19} {duration_text(s):>8} {_exit(s):>4} "
        f"{s.tool_calls:>5} {s.execs:>6} {surv:>4} {s.severity or '-':8} {mode_text(s):9} "
        f"{escape(s.name)[:name_w]:{name_w}} {cmd}"
    )


@click.command("sessions")
@location_options
@click.option("--since", help="Only sessions started at or after TIME (ISO 8601 UTC, or 2h/7d).")
@click.option(
    "--server",
    "server",
    metavar="NAME",
    help="Only sessions of this server: its `run --name` or the name it gave itself in "
    "initialize (a glob: 'git*').",
)
@format_option("text", "json", help="text: one line per session; json: mcpshim.sessions/1.")
def sessions(
    shim_dir: Path | None, log_dir: Path | None, since: str | None, server: str | None, fmt: str
) -> None:
    """List the sessions in the log, newest first.

    \b
    Per session: its id (give any unique prefix of it, or `last`, to --session), start
    (UTC), duration, exit status (lost: `run` itself died, killed, and its watcher ended
    the family), tool calls, execs (shim records and processes sampling saw; with --trace
    the traced execs), survivors (for a lost session: what the watcher ended), the highest
    severity its last review found (- when not reviewed), how it ran (mcp: relayed with
    --mcp; trace: --trace; run: supervised; shims: MCPSHIM_SESSION set by hand), its name
    and its command.

    An index kept next to the log (updated by `run` and here) makes this fast on a large
    log; it is rebuilt from the log when missing.
    """
    loc = locations(shim_dir, log_dir)
    found = list_sessions(loc)
    if since is not None:
        from mcpshim.log.logview import parse_since  # (the view's redaction tables: only here)

        t = parse_since(since)
        found = [s for s in found if s.start is not None and s.start >= t]
    if server is not None:
        found = [
            s
            for s in found
            if fnmatch.fnmatchcase(s.name, server)
            or fnmatch.fnmatchcase(s.server.split(" ")[0] if s.server else "", server)
        ]
    if fmt == "json":
        click.echo(dumps({"schema": SCHEMA, "sessions": [s.to_json() for s in found]}))
        return
    width = max([len(escape(s.id)) for s in found] + [7])
    name_w = min(20, max([len(escape(s.name)) for s in found] + [4]))
    click.echo(
        f"{'SESSION':{width}} {'START (UTC)':19} {'DURATION':>8} {'EXIT':>4} {'CALLS':>5} "
        f"{'EXECS':>6} {'SURV':>4} {'REVIEWED':8} {'MODE':9} {'NAME':{name_w}} COMMAND"
    )
    for s in found:
        click.echo(_line(s, width, name_w))


COMMANDS = [sessions]
