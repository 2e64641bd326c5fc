"""What `mcpshim run` sets up around the server before it starts: the table of file locations
that matter in this session (log.filetable: its HOME, workspace and PATH, the policy's
additions) and, with --contain, the ruleset it starts in (sandbox)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from mcpshim.base.display import escape
from mcpshim.cli.common import load_policy, resolve_lock
from mcpshim.contract.lockfile import load_lock, select_server
from mcpshim.errors import UsageError
from mcpshim.log.filetable import FileTable, Roots, entries
from mcpshim.sandbox import contained, landlock
from mcpshim.sandbox.contained import ContainError, Containment
from mcpshim.supervise.supervisor import Supervisor
from mcpshim.trace import run as trace_run

__all__ = ["contain_session", "file_table"]


def file_table(sup: Supervisor, policy_file: Path | None) -> FileTable:
    """The locations that matter in this session: its HOME, workspace and PATH (the shim
    directory left out), and what the policy's [files] adds."""
    pol = load_policy(policy_file)
    shims = {str(sup.loc.shim_dir), os.path.realpath(sup.loc.shim_dir)}
    dirs = [d for d in sup.path.split(os.pathsep) if d and d not in shims]
    roots = Roots.of(sup.env, os.getcwd(), dirs)
    return FileTable(roots, entries(pol.files.credentials, pol.files.persistence))


def contain_session(
    sup: Supervisor,
    mode: str,
    lock_file: str | None,
    name: str,
    command: tuple[str, ...],
    write: tuple[Path, ...],
    tracer: trace_run.TraceRun | None,
    table: FileTable,
) -> None:
    """--contain: the ruleset the server starts in, from its lock entry (sandbox); or, for
    auto, the warning and record of why it runs uncontained."""
    if mode == "off":
        if write:
            raise click.UsageError("--contain-write needs --contain")
        return
    try:
        containment = _ruleset(sup, lock_file, name, command, write, tracer, table)
    except (UsageError, ContainError) as exc:  # a broken lock is an error all the same
        if mode != "auto":
            raise
        why = str(exc).removeprefix("--contain: ")
        click.echo(f"mcpshim: warning: not contained: {escape(why)}", err=True)
        sup.contain_record = {"state": "unavailable", "reason": why}
        return
    sup.contain, sup.contain_record = containment, containment.payload()
    click.echo(f"mcpshim: {escape(containment.plan.summary(containment.abi))}", err=True)
    if tracer is None:
        click.echo(
            "mcpshim: warning: not traced: what the ruleset refuses is not recorded", err=True
        )
    else:
        tracer.contained(*containment.tracer_hooks())


def _ruleset(
    sup: Supervisor,
    lock_file: str | None,
    name: str,
    command: tuple[str, ...],
    write: tuple[Path, ...],
    tracer: trace_run.TraceRun | None,
    table: FileTable,
) -> Containment:
    abi, why = landlock.unavailable()
    if why:
        raise UsageError(f"--contain: {why}")
    path = resolve_lock(lock_file or "auto")
    assert path is not None
    lock = load_lock(path)
    server = select_server(lock, name, command)
    if server is None:
        raise UsageError(
            f"--contain: {path} has no entry for this server (run it with --name NAME, the "
            "name it was approved under, or the command line it was approved with)"
        )
    dirs = [str(d.resolve()) for d in write] if write else None
    return contained.build(
        server, str(path), abi, sup.loc, tracer.strace if tracer else None, sup.path, dirs,
        command[0], table,
    )  # fmt: skip
