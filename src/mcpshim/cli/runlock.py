"""What `run` holds a server to when asked (--lock with --enforce, --on-departure terminate,
--contain): the lock's entry for the server, the gate, the departure watch and the ruleset.
Apart from run_cmd, and imported only when one of those options is given."""

from __future__ import annotations

from pathlib import Path

import click

from mcpshim.base.display import escape
from mcpshim.cli.options import resolve_lock
from mcpshim.contract.lockfile import load_lock, select_server
from mcpshim.errors import UsageError
from mcpshim.log.filetable import FileTable
from mcpshim.relay.gate import Gate
from mcpshim.sandbox import contained, landlock
from mcpshim.sandbox.contained import ContainError, Containment
from mcpshim.supervise.departwatch import DepartureWatch
from mcpshim.supervise.supervisor import Supervisor
from mcpshim.trace import run as trace_run

__all__ = ["contain", "hold_to_lock"]


def hold_to_lock(
    sup: Supervisor,
    lock_file: str | None,
    enforce: bool,
    on_departure: str,
    mcp: bool,
    name: str,
    command: tuple[str, ...],
) -> Gate | None:
    """The gate of --enforce and the watch of --on-departure terminate, from the lock."""
    if enforce and not mcp:
        raise click.UsageError("--enforce needs --mcp (it decides JSON-RPC requests)")
    if not enforce and on_departure != "terminate":
        return None
    path = resolve_lock(lock_file or "auto")
    assert path is not None
    lock = load_lock(path)
    if on_departure == "terminate":
        server = select_server(lock, name, command)
        if server is None:
            raise UsageError(
                f"{path} has no entry for this server: run it with --name NAME, the name it "
                "was approved under, or with the command line it was approved with"
            )
        DepartureWatch(sup, server, str(path))
    return Gate(lock, str(path), name, command, sup.emit, sup.session) if enforce else None


def contain(
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
        containment = _containment(sup, lock_file, name, command, write, tracer, table)
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


def _containment(
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
