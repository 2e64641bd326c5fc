"""mcpshim report: one relayed session as a self-contained HTML page or as markdown."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from mcpshim.base.display import escape, quote_argv
from mcpshim.cli.common import (
    LOCK_LOOKUP,
    format_option,
    load_policy,
    location_options,
    locations,
    lock_option,
    mark_reviewed,
    resolve_lock,
    session_option,
)
from mcpshim.cli.common import session as resolve
from mcpshim.cli.output import output_dir, write_output
from mcpshim.cli.sealnote import seal_note
from mcpshim.contract.identity import Identities
from mcpshim.contract.lockfile import Lock, load_lock, select_server
from mcpshim.errors import InputError, UsageError
from mcpshim.family import attribution
from mcpshim.log import execlog, marks, scope
from mcpshim.log.sessions import list_sessions
from mcpshim.paths import default_identity_cache
from mcpshim.render.cards import cards_html, cards_md
from mcpshim.render.html import render_html
from mcpshim.render.index_page import IndexRow, render_index_html
from mcpshim.render.md import SessionReport, md_text, render_md
from mcpshim.review import held, pipeline, policy
from mcpshim.review.cards import server_card
from mcpshim.review.departures import departures
from mcpshim.review.policy import apply_policy
from mcpshim.shim.manifest import load_manifest

__all__ = ["COMMANDS"]


@dataclass(frozen=True)
class _Built:
    rep: SessionReport
    subject: dict[str, str]
    card: Any
    init: Mapping[str, Any] | None


def _build(loc: Any, session: str, pol: policy.Policy, lock_path: Path | None) -> _Built:
    """One relayed session reviewed and attributed, with its approval card."""
    problems: list[execlog.LogProblem] = []
    refs = marks.segment_refs(loc)
    done, _collector = pipeline.review_records(
        scope.records(loc, session, problems),
        policy=pol,
        anchor=attribution.anchors_for(loc),
        session=session,
        shim_dir=str(loc.shim_dir),
        manifest=load_manifest(loc.shim_dir),
    )
    if not done.attributions:
        raise InputError(f"session {session} was not run with --mcp (no tool calls recorded)")
    cov = next((c for c in done.result.coverage if c.session == session), None)
    rep = SessionReport(done.attributions[0], done.findings, cov)
    subject = {"session": session, "log": str(loc.log_file), "policy": pol.source or "(defaults)"}
    start = rep.att.start
    if start is not None:
        subject["command"] = " ".join(str(a) for a in start.get("command", []))
        subject["started"] = str(start.get("time", "?"))
    if rep.att.end is not None:
        subject["exit status"] = str(rep.att.end.get("exit_status"))
    if rep.coverage is not None:
        subject["coverage"] = rep.coverage.line()
    [(att, ev)] = held.session_evidence(loc, session, problems)
    problems = list(dict.fromkeys(problems))  # the log was read more than once
    for p in problems:
        click.echo(f"mcpshim: {escape(p.where)}: {escape(p.message)}; skipped", err=True)
    if problems:
        subject["damaged records skipped"] = str(len(problems))
    sealed = seal_note(loc, session)
    subject["sealed"] = sealed.line
    start = att.start or {}
    lock = load_lock(lock_path) if lock_path is not None else Lock()
    told = str((ev.initialize or {}).get("server_name", ""))
    command = [str(a) for a in start.get("command", ())]
    approved = select_server(lock, str(start.get("name", "")), command, told)
    ids = Identities(ev.uid, default_identity_cache())
    card = server_card(att, ev, ids, approved.name if approved else "")
    if lock_path is not None:
        subject["lock"] = str(lock_path)
        found = departures(att, ev, approved, ids, lock.source)
        rep = SessionReport(rep.att, apply_policy(found, pol))
    rep = SessionReport(rep.att, sealed.findings(rep.findings))
    mark_reviewed(loc, refs, session, rep.findings)
    return _Built(rep, subject, card, ev.initialize)


def _render(b: _Built, fmt: str) -> str:
    if fmt == "html":
        return render_html(b.rep, b.subject, cards_html(b.card), b.init)
    return render_md(b.rep, b.subject, cards_md(b.card), b.init)


def _summary(b: _Built) -> str:
    return f"session {escape(b.rep.att.session)}: {len(b.rep.att.calls)} tool call(s), " + (
        f"{len(b.rep.findings)} finding(s)"
    )


def _file_name(session: str, ext: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]", "_", session).lstrip(".") or "session"
    name, n = f"{base}.{ext}", 1
    while name in taken or name in ("index.html", "index.md"):
        n += 1
        name = f"{base}-{n}.{ext}"
    taken.add(name)
    return name


def _all(loc: Any, out_dir: Path, fmt: str, pol: policy.Policy, lock_path: Path | None) -> None:
    with output_dir(out_dir) as dfd:
        _all_in(loc, out_dir, dfd, fmt, pol, lock_path)


def _all_in(
    loc: Any, out_dir: Path, dfd: int, fmt: str, pol: policy.Policy, lock_path: Path | None
) -> None:
    relayed = [s for s in list_sessions(loc) if s.relayed]
    rows: list[IndexRow] = []
    taken: set[str] = set()
    for s in relayed:
        b = _build(loc, s.id, pol, lock_path)
        name = _file_name(s.id, fmt, taken)
        write_output(Path(name), _render(b, fmt), dir_fd=dfd, shown=out_dir / name)
        click.echo(f"wrote {escape(str(out_dir / name))}: {_summary(b)}")
        rows.append(
            IndexRow(
                s.id,
                s.name,
                s.start.strftime("%Y-%m-%d %H:%M:%SZ") if s.start else "?",
                quote_argv(s.command),
                len(b.rep.att.calls),
                name,
                b.rep.findings,
            )
        )
    subject = {"log": str(loc.log_file), "policy": pol.source or "(defaults)"}
    index = out_dir / f"index.{fmt}"
    page = render_index_html(rows, subject) if fmt == "html" else _index_md(rows)
    write_output(Path(index.name), page, dir_fd=dfd, shown=index)
    click.echo(f"wrote {escape(str(index))}: {len(rows)} relayed session(s)")


def _index_md(rows: list[IndexRow]) -> str:
    out = [f"# mcpshim sessions ({len(rows)})", ""]
    for r in rows:
        worst = max((f.level for f in r.findings), default=None)
        out.append(
            f"- **{md_text(r.session)}** {md_text(r.name)} — started {md_text(r.started)}, "
            f"{r.tool_calls} tool call(s), {len(r.findings)} finding(s)"
            f"{f' (highest {worst.label})' if worst else ''}; page {md_text(r.page)}"
        )
        for f in sorted(r.findings, key=lambda f: (-f.level, f.rule.id, f.group)):
            out.append(f"  - **{f.level.label.upper()}** {f.rule.id} — {md_text(f.text)}")
    return "\n".join(out) + "\n"


@click.command("report")
@location_options
@session_option("The session (default: the last session run with --mcp).")
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="Every session run with --mcp: one page each in the directory -o names, and an "
    "index page (index.html or index.md) listing them with their findings.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, allow_dash=True),
    help="The file to write ('-' for stdout; with --all, a directory). Default for md: "
    "stdout; html needs it.",
)
@format_option(
    "html",
    "md",
    default="html",
    help="html: one self-contained page (no scripts, no network); md: for a code review.",
)
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML policy ([tools] maps tool names to the commands they may start).",
)
@lock_option(
    "Findings are only the departures from this approval (`mcpshim approve`); " + LOCK_LOOKUP
)
def report(
    shim_dir: Path | None,
    log_dir: Path | None,
    session: str | None,
    every: bool,
    output: Path | None,
    fmt: str,
    policy_file: Path | None,
    lock_file: str | None,
) -> int:
    """Write a report of one session relayed by `mcpshim run --mcp`, and say which.

    It holds the server's initialize exchange (name, version, protocol, capabilities,
    instructions), a timeline of the MCP tool calls (and resources/read, prompts/get) with
    the processes each one started and each response's size and hash, the session's
    process family, and the review findings with their evidence, including the tool-call
    rules: processes that outlived their call (MCS501), executables a tool's name does not
    explain (MCS502), processes of overlapping calls that cannot be told apart (MCS503) and
    messages that were not JSON-RPC (MCS504). Arguments are shown as recorded, credentials
    redacted (and said so); process text is escaped.

    Each tool also gets its approval card (what `mcpshim approve` shows: executables and
    who vouches for them, cwd, network, credential names, what outlived a call). With
    --lock the findings are only the departures from that approval.
    """
    loc = locations(shim_dir, log_dir)
    pol = load_policy(policy_file)
    lock_path = resolve_lock(lock_file)
    if every:
        if session is not None:
            raise UsageError("give --session or --all, not both")
        if output is None or str(output) == "-":
            raise UsageError("--all writes one page per session: give -o DIR")
        _all(loc, output, fmt, pol, lock_path)
        return 0
    sid = resolve(loc, session, relayed=True)
    if sid is None:
        sid = scope.latest_relayed(loc, [])
        if sid is None:
            raise InputError(f"no session run with --mcp in the log at {loc.log_dir}")
    if output is None and fmt == "html":
        raise UsageError("--format html needs -o FILE ('-' for stdout); md goes to stdout")
    built = _build(loc, sid, pol, lock_path)
    text = _render(built, fmt)
    if output is None or str(output) == "-":
        click.echo(text, nl=False)
        click.echo(f"mcpshim: report of {_summary(built)}", err=True)
        return 0
    if output.is_dir():
        raise UsageError(f"{output} is a directory (a directory is for --all)")
    write_output(output, text, parents=True)
    click.echo(f"wrote {escape(str(output))}: {_summary(built)}")
    return 0


COMMANDS = [report]
