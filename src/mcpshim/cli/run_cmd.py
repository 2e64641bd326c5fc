"""mcpshim run, mcpshim snapshot."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from mcpshim.base.display import escape
from mcpshim.cli import exit_when_done
from mcpshim.cli.options import (
    LOCK_LOOKUP,
    format_option,
    location_options,
    locations,
    lock_option,
)
from mcpshim.errors import McpshimError
from mcpshim.paths import Locations
from mcpshim.shim import registry
from mcpshim.shim import zdotdir as zdotdir_mod
from mcpshim.supervise.launch import adopt
from mcpshim.supervise.relayed import run_relayed
from mcpshim.supervise.runargs import RunArgs
from mcpshim.supervise.supervisor import OnExit, RunOptions, Supervisor
from mcpshim.trace import prepare as trace_prepare

if TYPE_CHECKING:
    from mcpshim.log import retention
    from mcpshim.relay.gate import Gate

# What only an option asks for (--lock, --enforce, --contain, --otlp, snapshot) is imported
# where it is used: `run`'s start-up is the time before its server runs.

__all__ = ["COMMANDS"]

F = TypeVar("F", bound=Callable[..., Any])


def _tristate(name: str, default: str, help: str) -> Callable[[F], F]:
    """NAME [on|auto|off]: the option alone means on."""
    return click.option(name, type=click.Choice(["on", "auto", "off"]), default=default,
                        show_default=True, is_flag=False, flag_value="on", help=help)  # fmt: skip


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@location_options
@click.option("--name", default="", help="A label for this session, kept in its records.")
@click.option(
    "--sample-ms",
    type=click.IntRange(min=10),
    default=100,
    show_default=True,
    help="How often the family is sampled for processes no shim saw and for sockets.",
)
@click.option(
    "--on-exit",
    type=click.Choice(["report", "terminate"]),
    default="report",
    show_default=True,
    help="What to do with descendants still alive once COMMAND has exited and the family "
    "had up to 0.5 s to end.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Seconds between SIGTERM and SIGKILL (--on-exit, --on-departure terminate).",
)
@_tristate(
    "--trace",
    "auto",
    "Linux: record every exec of the family with strace. auto: trace where strace "
    "can, else fall back to shims plus sampling (recorded, and shown in review's coverage "
    "line); --trace (on): refuse to run untraced.",
)
@click.option(
    "--no-trace",
    is_flag=True,
    help="Do not trace (--trace=off): shims plus sampling only, which miss short-lived "
    "execs that bypass a shim.",
)
@click.option(
    "--trace-files/--no-trace-files",
    default=None,
    help="Traced: record the file facts that matter (trace-file): opens of credential "
    "files, writes to places that run later (crontab, shell start-up files, systemd and "
    "autostart units, authorized_keys, git hooks and configuration, a directory on PATH), "
    "execs of files the session wrote, and programs started after their parent read the "
    "project's configuration; no content is read. Off by default: it stops the family at "
    "every open, up to 2.6x the cost of run alone for a tool that writes 1,000 files "
    "(docs/performance.md); on under --contain, whose refused reads it records.",
)
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A review policy whose [files] credentials and persistence add to the locations "
    "the tracer records (review reads the rest of it).",
)
@click.option(
    "--zdotdir/--no-zdotdir",
    default=True,
    show_default=True,
    help="Point zsh's ZDOTDIR at mcpshim's startup files, which read yours and then put "
    "the shim directory first again (login profiles reset PATH; bash has no such hook).",
)
@click.option(
    "--mcp",
    is_flag=True,
    help="COMMAND is a stdio MCP server: relay its stdin/stdout bytes unchanged and record "
    "each tools/call, resources/read and prompts/get with its response (see `mcpshim report`).",
)
@lock_option(
    "The approval (`mcpshim approve`) that --enforce and --on-departure hold the server to "
    "(either of them without --lock: as --lock alone). " + LOCK_LOOKUP
)
@click.option(
    "--enforce",
    is_flag=True,
    help="With --mcp: answer a tools/call to a tool whose definition departs from the lock "
    "with a JSON-RPC error instead of passing it on (each request is parsed first).",
)
@click.option(
    "--on-departure",
    type=click.Choice(["report", "terminate"]),
    default="report",
    show_default=True,
    help="terminate: end the whole family at the first executable the lock does not approve "
    "for this server: the departure is recorded, one stderr line and (with --mcp) an MCP log "
    "notification tell the client, each member's evidence is read, then SIGTERM, SIGKILL "
    "after --grace. Containment, not prevention: it acts after the exec (traced: within "
    "milliseconds, as strace reports it; untraced: at the next shim record or sample), so "
    "between the exec and the signal the program runs, and what it starts: a short one's "
    "whole run, one that ignores SIGTERM until --grace is over (docs/threat-model.md).",
)
@_tristate(
    "--contain",
    "off",
    "Linux (Landlock, no root needed): the kernel holds the family to the lock's entry "
    "for this server. It may execute only the programs the lock approved (by path; with the "
    "ELF loader and #! interpreters they need, the shims and the tracer; sh shims are "
    "rebuilt native at start where the lock did not approve their shell, else the start "
    "line says sh stays executable), connect over TCP only to the ports of the destinations "
    "the lock lists (when it lists any, all with a port; kernel 6.7+; MPTCP sockets are then "
    "refused), read every file but the credential files here the lock does not list "
    "(~/.ssh keys, cloud CLI credentials, ...: a file made later beside one cannot be read "
    "either), and, with --contain-write, write only beneath those directories and "
    "the log directory. What it refuses fails with EACCES and, traced, is recorded: review "
    "shows it as blocked by the lock (MCS410). --contain refuses to start (exit 2) without a "
    "lock entry or Landlock; auto warns and runs uncontained. Limits: Landlock checks paths, "
    "not contents (review still checks the lock's hashes); an approved interpreter (sh, "
    "python, node) runs any script it is given, the ELF loader run by hand any binary, and "
    "a program in a memfd is not checked (review flags both, MCS411); UDP, Unix sockets and "
    "listening are not restricted, nor chmod, chown and utime outside the "
    "write directories (traced and recorded under --contain-write: MCS412).",
)
@click.option(
    "--contain-write",
    multiple=True,
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="With --contain: the family may write only beneath DIR (repeatable) and the log "
    "directory (and /dev/null, /dev/tty); servers write caches in many places, so this is "
    "opt-in.",
)
@click.option(
    "--otlp",
    metavar="URL",
    help="Stream the session as an OpenTelemetry trace to this OTLP/HTTP endpoint while it "
    "runs (needs mcpshim[otel]); what the endpoint does not take stays in the log for "
    "`mcpshim export otlp`.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    shim_dir: Path | None,
    log_dir: Path | None,
    name: str,
    sample_ms: int,
    on_exit: OnExit,
    grace: float,
    trace: str,
    no_trace: bool,
    trace_files: bool | None,
    policy_file: Path | None,
    zdotdir: bool,
    mcp: bool,
    lock_file: str | None,
    enforce: bool,
    on_departure: str,
    contain: str,
    contain_write: tuple[Path, ...],
    otlp: str | None,
    command: tuple[str, ...],
) -> int:
    """Run COMMAND as a supervised session and record its whole execution family.

    \b
    Use it as the `command` of an MCP client config (`mcpshim wrap-config` writes this):
      "command": "mcpshim", "args": ["run", "--mcp", "--", "npx", "-y", "some-server"]

    COMMAND gets a new session id in MCPSHIM_SESSION and the shim directory first on PATH;
    stdin, stdout and stderr are passed through untouched; SIGINT, SIGTERM and SIGHUP are
    forwarded; the exit status is COMMAND's (128+N when a signal N ended it).

    Into the exec log go: session-start (command, cwd, user, PATH, names but never values
    of credential-like variables), one `observed` record per descendant no shim recorded
    (e.g. /bin/sh started by absolute path), `socket` records for LISTEN/ESTABLISHED
    sockets, `reaped` for orphans the supervisor collected, `survivor` for each descendant
    alive when COMMAND exits, and session-end.

    On Linux the supervisor is a child subreaper: descendants that double-fork or call
    setsid stay in the family. Elsewhere it falls back to COMMAND's process group plus
    sampling, which loses a descendant that leaves the group between two samples.

    \b
    Tracing (Linux, on by default where ptrace is permitted) runs the family under strace
    (seccomp filter on process events only, under 1 ms of CPU per exec) and adds one
    `trace-exec` record per exec attempt, failed ones too (a PATH search shows each
    directory it tried), with UTC time, pid, start, parent, cwd, argv (redacted), the PATH
    it passed (no other variable is kept) and exit status, plus `trace-fork`, `trace-gap`
    and `trace-summary`: execs by absolute path and with the shim directory gone from
    PATH are on record, and review says why they missed their shim. Where strace cannot
    trace, the default (--trace=auto) continues with shims and sampling and records
    `trace-fallback`; --trace exits 2 instead, before starting anything; --no-trace does
    not trace.

    \b
    zsh login shells: ZDOTDIR points at mcpshim's startup files (--no-zdotdir: off), which
    read the user's own and then put the shim directory first again. bash login shells
    read /etc/profile whatever the environment says: only the trace sees what runs there.

    \b
    --mcp (stdio servers) puts a relay between the client and COMMAND: bytes pass through
    unchanged and in order; a copy of each JSON-RPC line is parsed off the forwarding path
    and each tools/call, resources/read and prompts/get is recorded (`mcp-request`: id,
    tool, arguments with credentials redacted, UTC time; `mcp-response`: time, isError,
    size, the family alive right after it) -- lines that do not parse are noted
    (`mcp-unparsed`). review, tree and `mcpshim report` then file every process under the
    tool call that started it.

    \b
    --lock L --enforce (with --mcp) refuses, with a JSON-RPC error the client sees, every
    tools/call to a tool not listed this session with the definition hash L approved, or its
    order hash (the same words and items in another order) (`mcp-refused` records each);
    --on-departure terminate ends the family at the first executable L does not approve for
    the server (`departure`, then `terminated` records), acting on each traced exec as it
    arrives: the program has started by then (a short one may be done), so this bounds a
    departure, it does not prevent it. Without them nothing is blocked.

    \b
    --lock L --contain starts the server in a Landlock ruleset built from L's entry for it
    (the supervisor and the relay stay outside): the kernel refuses (EACCES) every exec of
    a program L did not approve, and connects and writes as described under --contain; the
    tracer records each refusal. What this kernel's Landlock version supports is detected
    at start and said on one line; the session record holds the ruleset and the ABI, and
    review's coverage line says whether the session was contained.

    A log sealed with `mcpshim log seal --init` is sealed while the session runs (at most
    1 s behind) and once more when it ends, by a non-dumpable process of its own.
    """
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise click.UsageError("no COMMAND given (mcpshim run [OPTIONS] -- COMMAND [ARG...])")
    exit_when_done()  # a client waits for run's exit: nothing is left to do by then
    if otlp is not None:
        from mcpshim.otel import sdk

        sdk.require()
        sdk.endpoint_url(otlp)
    if no_trace:
        if trace == "on":
            raise click.UsageError("--trace and --no-trace contradict each other")
        trace = "off"
    plain = not (lock_file or enforce or on_departure != "report" or contain != "off"
                 or contain_write or otlp or trace_files or policy_file)  # fmt: skip
    # The session `mcpshim run` started before click loaded (supervise.launch), if it did.
    launched = adopt(RunArgs(shim_dir, log_dir, name, sample_ms, on_exit, grace, trace, zdotdir,
                             mcp, command) if plain else None)  # fmt: skip
    opts = RunOptions(name=name, sample_ms=sample_ms, on_exit=on_exit, grace=grace)
    if launched is not None:
        loc, tracer, why_not = launched.loc, launched.tracer, launched.why_not
        zdir = launched.zdotdir
    else:
        loc = locations(shim_dir, log_dir)
        tracer, why_not = trace_prepare.prepare(loc, trace, os.environ.get("PATH"))
        zdir = zdotdir_mod.ensure(loc.shim_dir) if zdotdir else None
    _warn_without_shims(loc, tracer is not None)
    state = "strace" if tracer is not None else "unavailable" if why_not else "off"
    sup = Supervisor(loc, list(command), opts, tracer=tracer, trace_state=state, zdotdir=zdir,
                     launch=launched, mcp=mcp)  # fmt: skip
    gate: Gate | None = None
    if enforce or on_departure == "terminate":
        from mcpshim.cli.runlock import hold_to_lock

        gate = hold_to_lock(sup, lock_file, enforce, on_departure, mcp, name, command)
    files = tracer is not None and (trace_files if trace_files is not None else contain != "off")
    if files or contain != "off" or contain_write:
        from mcpshim.cli.run_setup import file_table

        table = file_table(sup, policy_file)
        if files and tracer is not None:
            from mcpshim.trace.filefacts import FileTracing

            tracer.files = FileTracing(table)
        from mcpshim.cli.runlock import contain as hold_contained

        hold_contained(sup, contain, lock_file, name, command, contain_write, tracer, table)
    if why_not:
        click.echo(
            f"mcpshim: not tracing, recording with shims and sampling only: {escape(why_not)}",
            err=True,
        )
        sup.emit(
            "trace-fallback", trace_prepare.fallback_payload(sup.session, sup.boot_id, why_not)
        )
    if otlp is not None:
        from mcpshim.cli.export_cmd import start_live_stream

        sup.add_helper(start_live_stream(loc, sup.session, otlp))
    from mcpshim.log import retention

    settings = _log_settings()
    if settings.max_size is not None:
        sup.on_tick(retention.SizeWatch(loc, settings.max_size))
    try:
        return _session(sup, loc, gate, mcp, settings)
    finally:
        sup.close()  # the watcher, told the session was over, ended meanwhile


def _session(
    sup: Supervisor, loc: Locations, gate: Gate | None, mcp: bool, settings: retention.LogSettings
) -> int:
    """The session, then what follows it in the log: its index and the [log] limits."""
    from mcpshim.log import retention
    from mcpshim.seal.follow import following
    from mcpshim.seal.state import unsealed_check

    # A sealed log is sealed as the session goes (at most 1 s behind) and at its end, by a
    # process of its own: nothing on the supervisor's loop, no key in its memory.
    with following(loc) as sealer:
        if sealer is not None:
            sup.add_helper(sealer.pid)
        try:
            status = run_relayed(sup, gate) if mcp else sup.run()
        except OSError as exc:
            if sup.status is None:
                raise
            # The command ran and ended; what failed was mcpshim's own bookkeeping after it
            # (e.g. the trace records on a full disk): say so, and keep the command's status.
            what = f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)
            click.echo(f"mcpshim: warning: after the command ended: {escape(what)}", err=True)
            return sup.status
    # then the session index brought up to date and the [log] limits applied (sealed first)
    try:
        warning = retention.after_session(loc, settings, unsealed_check(loc.log_dir))
    except McpshimError as exc:
        warning = f"log retention: {exc}"
    if warning:
        click.echo(f"mcpshim: warning: {escape(warning)}", err=True)
    return status


def _log_settings() -> retention.LogSettings:
    """The [log] settings; a broken config file is said, never a reason not to run."""
    from mcpshim.log import retention

    try:
        return retention.load_settings()
    except McpshimError as exc:
        click.echo(f"mcpshim: warning: {escape(str(exc))}; log limits: the defaults", err=True)
        return retention.LogSettings()


@click.command()
@click.argument("pid", type=click.IntRange(min=1))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path, allow_dash=True),
    help="Write here ('-' for stdout). Default: a new file under the state directory.",
)
@format_option("text", "json", help="text for reading; json (schema mcpshim.snapshot/1) for tools.")
def snapshot(pid: int, output: Path | None, fmt: str) -> int:
    """Save the process family of PID: the ps / pgrep -P / lsof procedure in one step.

    For PID and every descendant: pid, ppid, user, UTC start, elapsed time, status, exe,
    the full command line (credentials redacted), cwd, the names of credential-like
    environment variables, open files and inet sockets. By default the snapshot goes to a
    new file in the state directory (outside any workspace) and its path is printed.
    """
    from mcpshim.base.safewrite import make_private_dir
    from mcpshim.cli.output import write_output
    from mcpshim.supervise import snapshot as snapshot_mod

    snap = snapshot_mod.take(pid)
    text = snapshot_mod.render_json(snap) if fmt == "json" else snapshot_mod.render_text(snap)
    if output is not None and str(output) == "-":
        sys.stdout.write(text)
        return 0
    path = output or snapshot_mod.default_path(snap, fmt)
    if output is None:
        make_private_dir(path.parent)
    write_output(path, text, mode=None if output else 0o600)
    click.echo(escape(str(path)))
    return 0


COMMANDS = [run, snapshot]


def _warn_without_shims(loc: Locations, traced: bool) -> None:
    """Say so when no shim directory mcpshim installed is there for the command: neither
    --dir's nor one already first on its PATH (`install --dir D`, D put first by hand)."""
    if (loc.shim_dir / "manifest.toml").exists():
        return
    path = [os.path.realpath(p) for p in os.environ.get("PATH", "").split(":") if p]
    if any(os.path.realpath(d) in path for d in registry.installed()):
        return
    seen = "the trace will see every exec" if traced else "only sampling will see the family"
    click.echo(
        f"mcpshim: warning: no shims installed in {escape(str(loc.shim_dir))} "
        f"(mcpshim install); {seen}",
        err=True,
    )
