"""Options shared by several commands, and what the commands that review share (the policy,
--fail-on, the findings' exit, review marks). The light options are cli.options's, here too."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from mcpshim.cli.options import (
    DIR_HELP,
    FORMAT_ORDER,
    F,
    format_option,
    location_options,
    locations,
    sub_locations,
)
from mcpshim.contract.lockfile import default_path, find_lock
from mcpshim.errors import EXIT_CLEAN, EXIT_FINDINGS, UsageError
from mcpshim.log import marks
from mcpshim.log.sessions import resolve_session
from mcpshim.paths import Locations
from mcpshim.review import policy
from mcpshim.review.findings import Finding, Severity, at_or_above

__all__ = [
    "DIR_HELP",
    "FORMAT_ORDER",
    "LOCK_LOOKUP",
    "fail_on_option",
    "findings_exit",
    "format_option",
    "load_policy",
    "location_options",
    "locations",
    "lock_option",
    "mark_reviewed",
    "resolve_lock",
    "session",
    "session_option",
    "sub_locations",
]


def load_policy(path: Path | None) -> policy.Policy:
    """The policy, each [severity] id checked against every rule mcpshim has (the
    catalogue's, loaded here only when a file is given: the defaults name no rule id)."""
    if path is None:
        return policy.default_policy()
    from mcpshim.review.catalogue import rules

    return policy.load_policy(path, frozenset(rules()))


def session_option(help: str) -> Callable[[F], F]:
    return click.option(
        "--session",
        metavar="ID",
        help=help + " ID: a session id, a unique prefix of one, or `last` (the newest).",
    )


def session(loc: Locations, value: str | None, relayed: bool = False) -> str | None:
    """The session a --session value names (None: none given); see log.sessions. Every
    command's --session goes through here."""
    return None if value is None else resolve_session(loc, value, relayed)


def fail_on_option(func: F) -> F:
    """--fail-on, shared by every command that reports findings (same default everywhere)."""
    return click.option(
        "--fail-on",
        type=click.Choice([s.label for s in Severity]),
        default="medium",
        show_default=True,
        help="Exit 1 when a finding is at or above this severity.",
    )(func)


def findings_exit(findings: Iterable[Finding], fail_on: str) -> int:
    return EXIT_FINDINGS if at_or_above(findings, Severity.parse(fail_on)) else EXIT_CLEAN


def mark_reviewed(
    loc: Locations, refs: list[dict[str, Any]], session: str | None, found: Sequence[Finding]
) -> None:
    """Note what a review read and the worst it found (log.marks: `sessions`, retention)."""
    worst = max((f.level for f in found), default=None)
    when = datetime.now(timezone.utc).isoformat()
    marks.note_review(loc, refs, session, worst.label if worst else "none", len(found), when)


#: how --lock alone finds the lock (contract.lockfile.find_lock), for every --lock's help
LOCK_LOOKUP = (
    "--lock alone looks for mcpshim.lock from here up (in the first directory that holds one "
    "or a client config), then in the user config dir."
)


def lock_option(help_text: str) -> Callable[[F], F]:
    """--lock PATH, or --lock alone for the default lookup (LOCK_LOOKUP)."""
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
