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
    LOCK_LOOKUP,
    F,
    format_option,
    location_options,
    locations,
    lock_option,
    resolve_lock,
    sub_locations,
)
from mcpshim.errors import EXIT_CLEAN, EXIT_FINDINGS
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
