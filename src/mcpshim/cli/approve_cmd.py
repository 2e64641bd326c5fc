"""mcpshim approve: a session's approval cards, confirmed per server, merged into the lock."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from mcpshim.base.display import escape
from mcpshim.cli.common import format_option, location_options, locations, session_option
from mcpshim.cli.common import session as resolve
from mcpshim.contract.identity import Identities
from mcpshim.contract.lockfile import (
    Lock,
    default_path,
    find_lock,
    load_lock,
    save_lock,
    select_server,
)
from mcpshim.contract.lockmerge import merge
from mcpshim.errors import EXIT_FINDINGS, InputError, UsageError
from mcpshim.family import attribution
from mcpshim.family.attribution import Attribution
from mcpshim.log import execlog
from mcpshim.paths import Locations
from mcpshim.render.cards import cards_md, cards_text
from mcpshim.review.boundary import SessionEvidence, relayed_sessions
from mcpshim.review.cards import default_name, server_card
from mcpshim.review.departures import departures
from mcpshim.review.findings import Finding

__all__ = ["COMMANDS", "lock_departures", "lock_option", "resolve_lock", "session_evidence"]

F = TypeVar("F", bound=Callable[..., Any])


def lock_option(help_text: str) -> Callable[[F], F]:
    """--lock PATH, or --lock alone for the default lookup (next to the client config, then
    the user config dir)."""
    return click.option(
        "--lock",
        "lock_file",
        is_flag=False,
        flag_value="auto",
        default=None,
        metavar="PATH",
        help=help_text,
    )


def resolve_lock(value: str | None, must_exist: bool = True) -> Path | None:
    """The lock an option names: a path, "auto" (the default lookup) or None (no lock)."""
    if value is None:
        return None
    if value != "auto":
        return Path(value)
    found = find_lock()
    if found is None and must_exist:
        raise UsageError(
            "no mcpshim.lock found next to a client config (.mcp.json, .cursor/mcp.json, "
            "or .vscode/mcp.json, from here up) nor in the user config dir; give --lock PATH"
        )
    return found or default_path()


def session_evidence(
    loc: Locations, session: str | None, problems: list[execlog.LogProblem]
) -> list[tuple[Attribution, SessionEvidence]]:
    """The relayed sessions of the log (or `session`, an error when it is not there)."""
    found = relayed_sessions(
        execlog.iter_records(loc, problems), attribution.anchors_for(loc), session
    )
    if session is not None and not found:
        raise InputError(f"session {session} was not run with --mcp (no tool calls recorded)")
    return found


def lock_departures(
    loc: Locations, session: str | None, lock: Lock, problems: list[execlog.LogProblem]
) -> tuple[list[Finding], int]:
    """Departures of every relayed session (or `session`) from `lock`, and how many
    sessions were held to it."""
    found = session_evidence(loc, session, problems)
    ids = Identities()
    out: list[Finding] = []
    for att, ev in found:
        start = att.start or {}
        server = select_server(
            lock,
            str(start.get("name", "")),
            [str(a) for a in start.get("command", ())],
            str((ev.initialize or {}).get("server_name", "")),
        )
        out += departures(att, ev, server, ids, lock.source)
    return out, len(found)


@click.command("approve")
@location_options
@session_option("The session (default: the last session run with --mcp).")
@click.option(
    "--server",
    "server_name",
    default="",
    help="The name to approve the server under (default: the entry of the lock it already "
    "matches, else its `run --name`, else the name it gives itself in initialize).",
)
@lock_option(
    "The lock to write (default: mcpshim.lock next to the nearest client config, else in "
    "the user config dir)."
)
@click.option("--yes", is_flag=True, help="Approve without asking (for scripts).")
@format_option("text", "md", help="text for the terminal; md to paste into a review.")
def approve(
    shim_dir: Path | None,
    log_dir: Path | None,
    session: str | None,
    server_name: str,
    lock_file: str | None,
    yes: bool,
    fmt: str,
) -> int:
    """Show a relayed session's approval cards and write the approval into the lock.

    One card per tool, built from what the session recorded: its description and
    definition hash; every executable it ran, with its content hash, who vouches for it
    (the system package that owns it, or "unowned, in a directory the user can write") and
    how it was reached (PATH, an absolute path, a project file such as package.json
    scripts, a Makefile or a git hook); subcommands, working directories, the user, network
    destinations, credential-like variable names, and what it left running. Tools listed
    but not called are "definition only".

    The approval is merged into the lock (what is new is printed; nothing is removed) once
    you confirm it; --yes confirms without asking. `review --lock` then reports only what
    departs from it, and `run --mcp --lock L --enforce` refuses calls to drifted tools.
    """
    loc = locations(shim_dir, log_dir)
    session = resolve(loc, session)
    problems: list[execlog.LogProblem] = []
    if session is None:
        session = attribution.latest_session(execlog.iter_records(loc, problems))
        if session is None:
            raise InputError(f"no session run with --mcp in the log at {loc.log_dir}")
    att, ev = session_evidence(loc, session, problems)[0]
    path = resolve_lock(lock_file or "auto", must_exist=False)
    assert path is not None
    lock = load_lock(path) if path.exists() else Lock(source=str(path))
    if not server_name:
        start = att.start or {}
        told = str((ev.initialize or {}).get("server_name", ""))
        command = [str(a) for a in start.get("command", ())]
        known = select_server(lock, str(start.get("name", "")), command, told)
        server_name = known.name if known is not None else default_name(att, ev)
    card = server_card(att, ev, Identities(ev.uid), server_name)
    click.echo(cards_md(card) if fmt == "md" else cards_text(card), nl=False)
    merged, said = merge(lock, card.approval)
    if not said:
        click.echo(f"nothing new: {escape(str(path))} already approves all of it", err=True)
        return 0
    click.echo(f"\napproving server {escape(server_name)} adds to {escape(str(path))}:", err=True)
    for line in said:
        click.echo(f"  + {escape(line)}", err=True)
    question = f"Approve server {escape(server_name)} into {escape(str(path))}?"
    if not yes and not click.confirm(question, default=False, err=True):
        click.echo("not approved: nothing written", err=True)
        return EXIT_FINDINGS
    save_lock(merged, path)
    click.echo(f"wrote {escape(str(path))}", err=True)
    return 0


COMMANDS = [approve]
