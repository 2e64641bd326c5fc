"""The options every command shares (--dir, --log-dir, --format) and the locations they
name: light enough for a command that reviews nothing (`sessions`) to start fast."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from mcpshim.errors import UsageError
from mcpshim.paths import Locations, default_shim_dir
from mcpshim.shim.manifest import locations_for

__all__ = [
    "DIR_HELP",
    "FORMAT_ORDER",
    "LOCK_LOOKUP",
    "format_option",
    "location_options",
    "locations",
    "lock_option",
    "resolve_lock",
    "sub_locations",
]

DIR_HELP = "Shim directory. Default: shims/ under the user data directory."
#: every command lists its --format choices in this order
FORMAT_ORDER = ("text", "json", "md", "html", "sarif", "ecs", "dot")


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
        help=DIR_HELP,
    )(func)


def format_option(*choices: str, default: str | None = None, help: str = "") -> Callable[[F], F]:
    """--format with its choices in FORMAT_ORDER, whatever order the command names them in."""
    ordered = sorted(choices, key=FORMAT_ORDER.index)
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(ordered),
        default=default or ordered[0],
        show_default=True,
        help=help or None,
    )


def locations(shim_dir: Path | None, log_dir: Path | None) -> Locations:
    return locations_for(shim_dir or default_shim_dir(), log_dir)


def sub_locations(ctx: click.Context, shim_dir: Path | None, log_dir: Path | None) -> Locations:
    """A subcommand's --dir/--log-dir, given after it (`log seal --log-dir D`) or before it
    on its group (`log --log-dir D seal`, kept in ctx.obj); both, if different, are an error."""
    outer = ctx.obj if isinstance(ctx.obj, tuple) else (None, None)
    chosen: list[Path | None] = []
    for option, inner, given in (("--dir", shim_dir, outer[0]), ("--log-dir", log_dir, outer[1])):
        if inner is not None and given is not None and inner != given:
            raise UsageError(f"{option} given twice, as {given} and {inner}: give it once")
        chosen.append(inner if inner is not None else given)
    return locations(chosen[0], chosen[1])


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
    from mcpshim.contract.lockfile import default_path, find_lock

    found = find_lock()
    if found is None and must_exist:
        raise UsageError(
            "no mcpshim.lock found next to a client config (.mcp.json, .cursor/mcp.json, "
            "or .vscode/mcp.json, from here up) nor in the user config dir; give --lock PATH"
        )
    return found or default_path()
