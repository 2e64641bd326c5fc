"""mcpshim log, mcpshim log rotate (seal, verify and anchors: seal_cmd)."""

from __future__ import annotations

from pathlib import Path

import click

from mcpshim.base.display import dumps, escape
from mcpshim.cli.common import location_options, locations, session_option
from mcpshim.cli.common import session as resolve
from mcpshim.cli.seal_cmd import SUBCOMMANDS
from mcpshim.log import execlog, logview, rotation

__all__ = ["COMMANDS"]


@click.group(invoke_without_command=True)
@location_options
@session_option("Only records of this session.")
@click.option("--since", help="Only records at or after TIME (ISO 8601 UTC, or 30s/10m/2h/7d).")
@click.option("--pid", type=int, help="Only records of this pid.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "ecs"]),
    default="text",
    show_default=True,
    help="text: a table; json: one object per line; ecs: Elastic Common Schema.",
)
@click.pass_context
def log(
    ctx: click.Context,
    shim_dir: Path | None,
    log_dir: Path | None,
    session: str | None,
    since: str | None,
    pid: int | None,
    fmt: str,
) -> None:
    """Print the exec log (all segments, oldest first), streaming.

    Times are UTC; control characters in arguments and paths are escaped in text. In json,
    bytes that are not UTF-8 are kept exactly in `<field>_b64` siblings. A torn record (a
    crash mid-write) is reported on stderr and skipped.
    """
    if ctx.invoked_subcommand is not None:
        ctx.obj = (shim_dir, log_dir)
        return
    loc = locations(shim_dir, log_dir)
    flt = logview.Filter(resolve(loc, session), logview.parse_since(since) if since else None, pid)
    problems: list[execlog.LogProblem] = []
    uid = loc.log_dir.stat().st_uid if loc.log_dir.exists() else None
    records = logview.select(execlog.iter_records(loc, problems), flt)
    if fmt == "text":
        click.echo(logview.TEXT_HEADER)
    for rec in records:
        if fmt == "text":
            click.echo(logview.record_text(rec))
        elif fmt == "json":
            click.echo(dumps(logview.record_json(rec)))
        elif isinstance(rec, execlog.ExecRecord):
            click.echo(dumps(logview.record_ecs(rec, uid)))
    for p in problems:
        click.echo(f"mcpshim: {escape(p.where)}: {escape(p.message)}; skipped", err=True)


@log.command()
@click.option(
    "--keep",
    type=click.IntRange(min=0),
    default=None,
    help="Keep only the newest N rotated segments (and their spill files).",
)
@click.pass_context
def rotate(ctx: click.Context, keep: int | None) -> None:
    """Rotate the live log under its lock (rename, never copy or truncate)."""
    shim_dir, log_dir = ctx.obj
    loc = locations(shim_dir, log_dir)
    new, removed = rotation.rotate(loc, keep)
    click.echo(f"rotated to {escape(str(new))}" if new else "live log empty; nothing to rotate")
    for p in removed:
        click.echo(f"removed {escape(str(p))}")


for _sub in SUBCOMMANDS:
    log.add_command(_sub)

COMMANDS = [log]
