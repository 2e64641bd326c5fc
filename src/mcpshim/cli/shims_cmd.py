"""install, uninstall, list, path."""

from __future__ import annotations

import json
from pathlib import Path

import click

from mcpshim.base.display import escape
from mcpshim.cli.common import DIR_HELP, format_option, location_options, locations
from mcpshim.errors import InputError, UsageError
from mcpshim.paths import default_shim_dir
from mcpshim.shim import install as shim_install
from mcpshim.shim import render
from mcpshim.shim.native_install import NativeMode

__all__ = ["COMMANDS"]


def _parse_targets(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--target takes NAME=/abs/path, not {v!r}")
        out[render.check_name(name)] = path
    return out


class _InstallCommand(click.Command):
    """`--native` alone is a flag (`install --native git sh`); `--native=MODE` names a mode."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        out: list[str] = []
        for i, a in enumerate(args):
            if a == "--":
                out += args[i:]
                break
            out.append("--native=auto" if a == "--native" else a)
        return super().parse_args(ctx, out)


@click.command(cls=_InstallCommand)
@click.argument("commands", nargs=-1)
@location_options
@click.option(
    "--target",
    "targets",
    multiple=True,
    metavar="NAME=/ABS/PATH",
    help="Pin NAME to this target instead of searching the trusted path (later installs "
    "keep it while it exists).",
)
@click.option(
    "--on-log-failure",
    type=click.Choice(["run", "refuse"]),
    default="run",
    show_default=True,
    help="When the log cannot be written: run the target with one warning line, "
    "or refuse (exit 126).",
)
@click.option(
    "--allow-unsafe-target",
    is_flag=True,
    help="Accept a target in a temporary or group/world-writable directory.",
)
@click.option(
    "--interpreter",
    type=click.Path(dir_okay=False),
    default=None,
    help="Shell for the shims' #! line (default: dash if present, else /bin/sh).",
)
@click.option(
    "--native",
    "native_mode",
    type=click.Choice(["auto", "require", "off"]),
    metavar="[=auto|require|off]",
    default=None,
    help="Compiled shims (Linux x86_64/aarch64, built now with cc or $CC): the same record, "
    "a fraction of the cost. --native: where they can be built, else sh shims with a warning; "
    "--native=require: exit 2 where they cannot; --native=off: sh shims. Default: each shim "
    "keeps its kind (new ones sh).",
)
def install(
    commands: tuple[str, ...],
    shim_dir: Path | None,
    log_dir: Path | None,
    targets: tuple[str, ...],
    on_log_failure: str,
    allow_unsafe_target: bool,
    interpreter: str | None,
    native_mode: str | None,
) -> None:
    """Write one shim per COMMAND (default: git ssh sh node npm).

    Each target is resolved once, now, from the system default path plus /usr/local/bin and
    /opt/homebrew/bin (never from your PATH) and pinned in the shim with its log directory.
    Running install again changes nothing unless a target moved; a target pinned with
    --target stays pinned (give --target again to move it); files mcpshim did not write are
    never touched.
    """
    loc = locations(shim_dir, log_dir)
    try:
        result = shim_install.install(
            loc,
            commands,
            _parse_targets(targets),
            on_failure="refuse" if on_log_failure == "refuse" else "run",
            allow_unsafe=allow_unsafe_target,
            interpreter=interpreter,
            native_mode=_native_mode(native_mode),
        )
    except OSError as exc:  # a full disk, a read-only directory: say where, in one line
        where = f"{exc.filename}: " if exc.filename else ""
        raise InputError(
            f"cannot install shims in {loc.shim_dir} (log {loc.log_dir}): "
            f"{where}{exc.strerror or exc}"
        ) from None
    for note in result.notes:
        click.echo(f"mcpshim: warning: {escape(note)}", err=True)
    for e in result.installed:
        kind = " (native)" if e.kind == "native" else ""
        click.echo(f"installed {e.name} -> {escape(e.target)}{kind}")
    for name in result.unchanged:
        click.echo(f"unchanged {name}")
    for name, why in result.skipped.items():
        click.echo(f"skipped {name}: {escape(why)}")
    click.echo(f"shim dir: {escape(str(loc.shim_dir))}")
    click.echo(f"exec log: {escape(str(loc.log_file))}")
    click.echo(
        f"put it first on PATH: {shim_install.path_line(loc.shim_dir, shim_install.which_shell())}"
    )


def _native_mode(value: str | None) -> NativeMode | None:
    if value == "auto":
        return "auto"
    if value == "require":
        return "require"
    if value == "off":
        return "off"
    return None


@click.command()
@click.argument("commands", nargs=-1)
@click.option("--dir", "shim_dir", type=click.Path(file_okay=False, path_type=Path), help=DIR_HELP)
@click.option("--all", "everything", is_flag=True, help="Remove every shim mcpshim installed.")
def uninstall(commands: tuple[str, ...], shim_dir: Path | None, everything: bool) -> None:
    """Remove shims (only files mcpshim wrote; the log stays)."""
    if everything and commands:
        raise UsageError("give command names or --all, not both")
    for name in shim_install.uninstall(shim_dir or default_shim_dir(), commands, everything):
        click.echo(f"removed {name}")


@click.command("list")
@click.option("--dir", "shim_dir", type=click.Path(file_okay=False, path_type=Path), help=DIR_HELP)
@format_option("text", "json", help="text for reading; json for tools.")
def list_(shim_dir: Path | None, fmt: str) -> int:
    """Each shim, its target, and whether the target still matches the manifest; then the
    shim library every shim sources.

    Exits 1 when a target changed or went missing, or a shim or the library was edited or
    removed.
    """
    d = shim_dir or default_shim_dir()
    statuses = shim_install.list_shims(d)
    lib = shim_install.lib_status(d)
    if fmt == "json":
        docs: list[dict[str, object]] = [
            {
                "name": s.entry.name,
                "kind": "shim",
                "type": s.entry.kind,
                "target": s.entry.target,
                "sha256": s.entry.sha256,
                "size": s.entry.size,
                "installed": s.entry.installed.isoformat(),
                "state": s.state,
            }
            for s in statuses
        ]
        if lib is not None:
            docs.append({"name": render.LIB, "kind": "library", "state": lib})
        click.echo(json.dumps(docs, indent=2))
    else:
        for s in statuses:
            click.echo(f"{s.entry.name:12} {s.entry.kind:6} {s.state:15} {escape(s.entry.target)}")
        if lib is not None:
            click.echo(f"{render.LIB:12} {lib:15} {escape(str(d / render.LIB))}")
        if not statuses:
            click.echo("no shims installed")
    return 0 if all(s.ok for s in statuses) and lib in (None, "ok") else 1


@click.command()
@click.option("--dir", "shim_dir", type=click.Path(file_okay=False, path_type=Path), help=DIR_HELP)
@click.option(
    "--shell",
    type=click.Choice(["sh", "fish"]),
    default=None,
    help="Syntax of the line (default: from $SHELL).",
)
def path(shim_dir: Path | None, shell: str | None) -> None:
    """Print the line that puts the shim directory first on PATH."""
    click.echo(
        shim_install.path_line(shim_dir or default_shim_dir(), shell or shim_install.which_shell())
    )


COMMANDS = [install, uninstall, list_, path]
