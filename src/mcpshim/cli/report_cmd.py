"""mcpshim report: one relayed session as a self-contained HTML page or as markdown."""

from __future__ import annotations

from pathlib import Path

import click

from mcpshim.base.display import escape
from mcpshim.cli.approve_cmd import lock_option, resolve_lock, session_evidence
from mcpshim.cli.common import load_policy, location_options, locations
from mcpshim.cli.sealnote import seal_note
from mcpshim.contract.identity import Identities
from mcpshim.contract.lockfile import Lock, load_lock, select_server
from mcpshim.errors import InputError, UsageError
from mcpshim.family import attribution
from mcpshim.log import execlog
from mcpshim.render.cards import cards_html, cards_md
from mcpshim.render.html import render_html
from mcpshim.render.md import SessionReport, render_md, session_report
from mcpshim.review.cards import server_card
from mcpshim.review.departures import departures
from mcpshim.review.policy import apply_policy
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
@lock_option(
    "Findings are only the departures from this approval (`mcpshim approve`); --lock alone "
    "looks for mcpshim.lock next to the client config, then in the user config dir."
)
def report(
    shim_dir: Path | None,
    log_dir: Path | None,
    session: str | None,
    output: Path,
    fmt: str,
    policy_file: Path | None,
    lock_file: str | None,
) -> int:
    """Write a report of one session relayed by `mcpshim run --mcp`.

    It holds a timeline of the MCP tool calls (and resources/read, prompts/get) with the
    processes each one started, the session's process family, and the review findings with
    their evidence, including the tool-call rules: processes that outlived their call
    (MCS501), executables a tool's name does not explain (MCS502), processes of overlapping
    calls that cannot be told apart (MCS503) and messages that were not JSON-RPC (MCS504).
    Arguments are shown as recorded, credentials redacted; process text is escaped.

    Each tool also gets its approval card (what `mcpshim approve` shows: executables and
    who vouches for them, cwd, network, credential names, what outlived a call). With
    --lock the findings are only the departures from that approval.
    """
    loc = locations(shim_dir, log_dir)
    pol = load_policy(policy_file)
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
    [(att, ev)] = session_evidence(loc, session, problems)
    problems = list(dict.fromkeys(problems))  # the log was read more than once
    for p in problems:
        click.echo(f"mcpshim: {escape(p.where)}: {escape(p.message)}; skipped", err=True)
    if problems:
        subject["damaged records skipped"] = str(len(problems))
    sealed = seal_note(loc)
    subject["sealed"] = sealed.line
    start = att.start or {}
    lock_path = resolve_lock(lock_file)
    lock = load_lock(lock_path) if lock_path is not None else Lock()
    told = str((ev.initialize or {}).get("server_name", ""))
    command = [str(a) for a in start.get("command", ())]
    approved = select_server(lock, str(start.get("name", "")), command, told)
    ids = Identities(ev.uid)
    card = server_card(att, ev, ids, approved.name if approved else "")
    if lock_path is not None:
        subject["lock"] = str(lock_path)
        found = departures(att, ev, approved, ids, lock.source)
        rep = SessionReport(rep.att, apply_policy(found, pol))
    rep = SessionReport(rep.att, sealed.findings(rep.findings))
    if fmt == "html":
        text = render_html(rep, subject, cards_html(card))
    else:
        text = render_md(rep, subject, cards_md(card))
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
