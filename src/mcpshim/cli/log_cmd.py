"""mcpshim log, mcpshim log rotate (seal, verify and anchors: seal_cmd)."""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click

from mcpshim.base.display import dumps, escape
from mcpshim.cli.common import (
    format_option,
    location_options,
    locations,
    session_option,
    sub_locations,
)
from mcpshim.cli.common import session as resolve
from mcpshim.cli.seal_cmd import SUBCOMMANDS
from mcpshim.errors import UsageError
from mcpshim.family.attribution import anchors_for
from mcpshim.family.images import Image
from mcpshim.family.model import Assembler
from mcpshim.log import execlog, logview, retention, rotation, scope, sessionindex
from mcpshim.log.filerecords import file_record
from mcpshim.log.follow import Follower
from mcpshim.log.netrecords import net_record
from mcpshim.paths import Locations
from mcpshim.render.ecs import ecs_doc, ecs_file_doc, ecs_fork_doc, ecs_net_doc
from mcpshim.seal.state import unsealed_check

__all__ = ["COMMANDS"]


@click.group(invoke_without_command=True)
@location_options
@session_option("Only records of this session.")
@click.option("--since", help="Only records at or after TIME (ISO 8601 UTC, or 30s/10m/2h/7d).")
@click.option("--pid", type=int, help="Only records of this pid.")
@format_option(
    "text",
    "json",
    "ecs",
    help="text: a table; json: one object per line; ecs: Elastic Common Schema.",
)
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Keep printing records as they are written, in time order across writers (about "
    "1 s behind), through rotations, until interrupted. Starts at the end of the log, or "
    "at --since.",
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
    follow: bool,
) -> None:
    """Print the exec log (all segments, oldest first), streaming.

    Times are UTC; control characters in arguments and paths are escaped in text. In json,
    bytes that are not UTF-8 are kept exactly in `<field>_b64` siblings. A torn record (a
    crash mid-write) is reported on stderr and skipped. With --follow, every record is
    printed once, whatever rotation does meanwhile; SIGINT or SIGTERM stop it after
    printing what it has read, and so does a closed pipe (`| head`).
    """
    if ctx.invoked_subcommand is not None:
        ctx.obj = (shim_dir, log_dir)
        return
    loc = locations(shim_dir, log_dir)
    flt = logview.Filter(resolve(loc, session), logview.parse_since(since) if since else None, pid)
    problems: list[execlog.LogProblem] = []
    uid = loc.log_dir.stat().st_uid if loc.log_dir.exists() else None
    show, done = _printer(fmt, uid, flt, loc)
    if follow:
        _follow(Follower(loc, problems), flt, show, fmt, history=since is not None)
        done()
        return
    records = scope.records(loc, flt.session, problems)
    if fmt == "text":
        click.echo(logview.TEXT_HEADER)
    for rec in records if fmt == "ecs" else logview.select(records, flt):
        show(rec)
    done()
    _problems(problems)


def _problems(problems: Iterable[execlog.LogProblem]) -> None:
    for p in problems:
        click.echo(f"mcpshim: {escape(p.where)}: {escape(p.message)}; skipped", err=True)


def _printer(
    fmt: str, uid: int | None, flt: logview.Filter, loc: Locations
) -> tuple[Callable[[execlog.Record], None], Callable[[], None]]:
    """(show a record, say what is left at the end). ECS shows the process model's execs
    (family.model): it is fed every record, the filter applied to each exec it makes;
    and each traced socket call, the filter applied to it."""
    if fmt != "ecs":
        view = logview.record_text if fmt == "text" else lambda r: dumps(logview.record_json(r))
        return (lambda rec: click.echo(view(rec))), (lambda: None)
    model = Assembler(flt.session)
    anchor = anchors_for(loc)

    def emit(imgs: Iterable[Image]) -> None:
        for img in imgs:
            fork = img.source == "trace-fork"  # a process that never exec'd: one of its own
            if not (img.entry or fork) or (flt.pid is not None and img.pid != flt.pid):
                continue
            if flt.since is not None and (img.time is None or img.time < flt.since):
                continue
            doc = ecs_fork_doc(img, anchor, uid) if fork else ecs_doc(img, anchor, uid)
            click.echo(dumps(doc))

    def show(rec: execlog.Record) -> None:
        emit(model.feed(rec))
        n = net_record(rec)  # a socket call: its own network event
        if n is not None and flt.accepts(rec):
            click.echo(dumps(ecs_net_doc(n, uid)))
        f = file_record(rec)  # a file fact: its own file event
        if f is not None and flt.accepts(rec):
            click.echo(dumps(ecs_file_doc(f, uid)))

    return show, (lambda: emit(model.finish()))


def _reader_gone() -> bool:
    """stdout is a pipe whose reader closed it (`log -f | head`): no record has to break
    the pipe first for us to notice."""
    p = select.poll()
    p.register(sys.stdout.fileno(), 0)  # error events only
    return any(ev & (select.POLLERR | select.POLLHUP) for _fd, ev in p.poll(0))


def _follow(
    fol: Follower,
    flt: logview.Filter,
    show: Callable[[execlog.Record], None],
    fmt: str,
    history: bool,
) -> None:
    """Poll until SIGINT/SIGTERM (a flag, so no record is lost between read and print)."""
    stop: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        stop.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if fmt == "text":
            click.echo(logview.TEXT_HEADER)
        batch, done = fol.start(history), False
        while True:
            for rec in batch if fmt == "ecs" else logview.select(batch, flt):
                show(rec)
            _problems(fol.problems)
            fol.problems.clear()
            sys.stdout.flush()
            if done or _reader_gone():
                break
            if not stop:
                time.sleep(0.2)
            batch, done = (fol.flush(), True) if stop else (fol.poll(), False)
    except BrokenPipeError:  # the reader went away: nothing more to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        fol.close()
        for s, handler in old.items():
            signal.signal(s, handler)


@log.command()
@location_options
@click.option(
    "--keep",
    type=click.IntRange(min=0),
    default=None,
    help="Keep only the newest N rotated segments (and their spill files).",
)
@click.option(
    "--auto",
    is_flag=True,
    help="Apply the [log] limits of the config file (max_size, keep, max_total): rotate "
    "only once the live log reached max_size, then drop the oldest segments over the "
    "limits. For cron or a systemd timer.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --auto: this config file instead of config.toml in the user config dir.",
)
@click.pass_context
def rotate(
    ctx: click.Context,
    shim_dir: Path | None,
    log_dir: Path | None,
    keep: int | None,
    auto: bool,
    config_file: Path | None,
) -> None:
    """Rotate the live log under its lock (rename, never copy or truncate).

    Every segment dropped is first said in a `log-dropped` record in the live log: what it
    held (sessions, records, times), whether a review had read it and, in a sealed log,
    whether seals covered it.
    """
    loc = sub_locations(ctx, shim_dir, log_dir)
    if auto and keep is not None:
        raise UsageError("give --keep or --auto (the config file's [log] keep), not both")
    if config_file is not None and not auto:
        raise UsageError("--config goes with --auto")
    if auto:
        settings = retention.load_settings(config_file)
        out = retention.apply(loc, settings, sessionindex.update(loc), unsealed_check(loc.log_dir))
        new, removed = out.rotated, out.dropped
        if new is None:
            click.echo(f"live log under max_size ({settings.source}); not rotated")
        for p, why in out.kept:
            click.echo(f"kept {escape(str(p))} over the limits: {', '.join(why)}")
    else:
        index = sessionindex.update(loc) if keep is not None else None
        describe = retention.describer(loc, index, unsealed_check(loc.log_dir))
        new, removed = rotation.rotate(loc, keep, describe)
        click.echo(f"rotated to {escape(str(new))}" if new else "live log empty; nothing to rotate")
    if new is not None and auto:
        click.echo(f"rotated to {escape(str(new))}")
    for p in removed:
        click.echo(f"removed {escape(str(p))} (said in a log-dropped record)")


for _sub in SUBCOMMANDS:
    log.add_command(_sub)

COMMANDS = [log]
