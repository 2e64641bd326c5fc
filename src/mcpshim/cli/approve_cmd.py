"""mcpshim approve: a session's approval cards, confirmed per server, merged into the lock."""

from __future__ import annotations

from pathlib import Path

import click

from mcpshim.base.display import escape
from mcpshim.cli.common import (
    format_option,
    location_options,
    locations,
    lock_option,
    resolve_lock,
    session_option,
)
from mcpshim.cli.common import session as resolve
from mcpshim.contract.identity import Identities
from mcpshim.contract.lockfile import Lock, load_lock, save_lock, select_server
from mcpshim.contract.lockmerge import drifted, merge
from mcpshim.errors import EXIT_FINDINGS, InputError
from mcpshim.log import execlog, scope
from mcpshim.paths import default_identity_cache
from mcpshim.render.cards import cards_md, cards_text
from mcpshim.review.cards import default_name, server_card, with_drift
from mcpshim.review.held import session_evidence

__all__ = ["COMMANDS"]


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
    "The lock to write (default: the lock --lock alone finds, else a new mcpshim.lock next "
    "to the nearest client config, else in the current directory)."
)
@click.option("--yes", is_flag=True, help="Approve without asking (for scripts).")
@click.option(
    "--update",
    is_flag=True,
    help="Accept the tools whose definition drifted from the lock's (their diff is shown on "
    "their cards first); without it a drifted definition stays as approved.",
)
@format_option("text", "md", help="text for the terminal; md to paste into a review.")
def approve(
    shim_dir: Path | None,
    log_dir: Path | None,
    session: str | None,
    server_name: str,
    lock_file: str | None,
    yes: bool,
    update: bool,
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

    A tool whose definition departs from the one in the lock shows the diff on its card
    (description words, schema fields, annotations). Only the order of the same words and
    items changing (a server listing a Python set) is no drift: the approved definition
    stays. Any other drift is accepted only with --update; without it the lock keeps the
    approved definition and approve says so (exit 1 when nothing else was new).
    """
    loc = locations(shim_dir, log_dir)
    session = resolve(loc, session, relayed=True)
    problems: list[execlog.LogProblem] = []
    if session is None:
        session = scope.latest_relayed(loc, problems)
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
    approved = lock.servers.get(server_name)
    ids = Identities(ev.uid, default_identity_cache())
    card = with_drift(server_card(att, ev, ids, server_name), approved)
    click.echo(cards_md(card) if fmt == "md" else cards_text(card), nl=False)
    held = [] if update else drifted(approved, card.approval)
    merged, said = merge(lock, card.approval, update)
    for name in held:
        click.echo(
            f"tool {escape(name)}: its definition drifted from the approved one (the diff is "
            "on its card); not accepted: `mcpshim approve --update` accepts it",
            err=True,
        )
    if not said:
        if held:
            click.echo(f"not approved: nothing else new for {escape(str(path))}", err=True)
            return EXIT_FINDINGS
        click.echo(f"nothing new: {escape(str(path))} already approves all of it", err=True)
        return 0
    click.echo(f"\napproving server {escape(server_name)} adds to {escape(str(path))}:", err=True)
    if att.overlaps:
        groups = "; ".join(f"calls {g.label}" for g in att.overlaps)
        click.echo(f"  (made from overlapping calls whose processes were not told apart: "
                   f"{escape(groups)}; each is approved for every tool it may belong to)",
                   err=True)  # fmt: skip
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
