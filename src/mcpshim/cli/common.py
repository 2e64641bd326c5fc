"""Options shared by several commands."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click

from mcpshim.errors import EXIT_CLEAN, EXIT_FINDINGS
from mcpshim.pathcheck import lint as _registers_mcs2xx
from mcpshim.paths import Locations, default_shim_dir
from mcpshim.review import policy, rules
from mcpshim.review.findings import RULES, Finding, Severity, at_or_above
from mcpshim.shim.manifest import locations_for

__all__ = ["fail_on_option", "findings_exit", "load_policy", "location_options", "locations"]

_ = (rules, _registers_mcs2xx)  # imported for the rules they register


def load_policy(path: Path | None) -> policy.Policy:
    """The policy, each [severity] id checked against every rule mcpshim has."""
    return policy.load_policy(path, frozenset(RULES))


F = TypeVar("F", bound=Callable[..., Any])


def location_options(func: F) -> F:
    """--dir (the shim directory) and --log-dir (default: the one its shims are pinned to)."""
    func = click.option(
        "--log-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Exec log directory. Default: the one the shims in --dir are pinned to.",
    )(func)
    return click.option(
        "--dir",
        "shim_dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Shim directory. Default: shims/ under the user data directory.",
    )(func)


def locations(shim_dir: Path | None, log_dir: Path | None) -> Locations:
    return locations_for(shim_dir or default_shim_dir(), log_dir)


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
