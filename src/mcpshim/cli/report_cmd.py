"""mcpshim report: one relayed session as a self-contained HTML page or as markdown."""

from __future__ import annotations

from pathlib import Path

import click

from mcpshim.base.display import escape
from mcpshim.cli.common import location_options, locations
from mcpshim.errors import InputError, UsageError
from mcpshim.family import attribution
from mcpshim.log import execlog
from mcpshim.render.html import render_html
from mcpshim.render.md import render_md, session_report
from mcpshim.review import policy
from mcpshim.shim.manifest import load_manifest

__all__ = ["COMMANDS"]


@click.command("report")
@location_options
@click.option("--session", help="The session id (default: the last session run with --mcp).")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path, allow_dash=True),
    help="The file to write ('-' for stdout).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md"]),
    default="html",
    show_default=True,
    help="html: one self-contained page (no scripts, no network); md: for a code review.",
)
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML policy ([tools] maps tool names to the commands they may start).",
)
def report(
    shim_dir: Path | None,
    log_dir: Path | None,
    session: str | None,
    output: Path,
    fmt: str,
    policy_file: Path | None,
) -> int:
    """Write a report of one session relayed by `mcpshim run --mcp`.

    It holds a timeline of the MCP tool calls (and resources/read, prompts/get) with the
    processes each one started, the session's process family, and the review findings with
    their evidence, including the tool-call rules: processes that outlived their call
    (MCS501), executables a tool's name does not explain (MCS502), processes of overlapping
    calls that cannot be told apart (MCS503) and messages that were not JSON-RPC (MCS504).
    Arguments are shown as recorded, credentials redacted; process text is escaped.
    """
    loc = locations(shim_dir, log_dir)
    pol = policy.load_policy(policy_file)
    problems: list[execlog.LogProblem] = []
    if session is None:
        session = attribution.latest_session(execlog.iter_records(loc, problems))
        if session is None:
            raise InputError(f"no session run with --mcp in the log at {loc.log_dir}")
    rep = session_report(
        execlog.iter_records(loc, problems),
        session,
        pol,
        attribution.anchors_for(loc),
        str(loc.shim_dir),
        load_manifest(loc.shim_dir),
    )
    if rep is None:
        raise InputError(f"session {session} was not run with --mcp (no tool calls recorded)")
    subject = {"session": session, "log": str(loc.log_file), "policy": pol.source or "(defaults)"}
    start = rep.att.start
    if start is not None:
        subject["command"] = " ".join(str(a) for a in start.get("command", []))
        subject["started"] = str(start.get("time", "?"))
    if rep.att.end is not None:
        subject["exit status"] = str(rep.att.end.get("exit_status"))
    if problems:
        subject["damaged records skipped"] = str(len(problems))
    text = render_html(rep, subject) if fmt == "html" else render_md(rep, subject)
    if str(output) == "-":
        click.echo(text, nl=False)
        return 0
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{output}: cannot write: {exc.strerror}") from None
    click.echo(f"wrote {escape(str(output))}")
    return 0


COMMANDS = [report]
