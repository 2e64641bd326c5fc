"""mcpshim lint-path, mcpshim wrap-config."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click

from mcpshim.base.display import escape
from mcpshim.cli.common import fail_on_option, findings_exit, format_option, load_policy
from mcpshim.errors import UsageError
from mcpshim.pathcheck import clientpath, wrapfile
from mcpshim.pathcheck import facts as pathfacts
from mcpshim.pathcheck import wrap as wrapconfig
from mcpshim.pathcheck.clientconfig import McpConfig, load_config
from mcpshim.pathcheck.launch import launch_line, lint_config
from mcpshim.pathcheck.lint import LintSettings, Scope, lint_path, shadows
from mcpshim.paths import default_shim_dir
from mcpshim.render.formats import FINDINGS_FORMATS, findings_renderer
from mcpshim.render.report import Report
from mcpshim.review.findings import Finding
from mcpshim.review.policy import apply_policy
from mcpshim.shim import registry
from mcpshim.shim.manifest import load_manifest

__all__ = ["COMMANDS"]

_DIR_HELP = "Shim directory expected first on PATH. Default: shims/ under the user data directory."


def _shim_dir(shim_dir: Path | None) -> tuple[str, str]:
    if shim_dir is not None:
        return os.path.abspath(shim_dir), "from --dir"
    return str(default_shim_dir()), "the default; pass --dir to name another"


def _other_shim_dirs(shim_dir: Path | None, shim: str) -> tuple[str, ...]:
    """Without --dir, every shim directory mcpshim installed counts as a shim directory."""
    if shim_dir is not None:
        return ()
    return tuple(d for d in registry.installed() if os.path.realpath(d) != os.path.realpath(shim))


@click.command("lint-path")
@click.argument("path_value", metavar="[PATH]", required=False)
@click.option("--env", "from_env", is_flag=True, help="Check this process's own PATH.")
@click.option("--pid", type=int, help="Check the PATH of a running process (Linux /proc).")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Check every server in an MCP client config (Claude Desktop, Claude Code, Cursor, "
    "VS Code): launch lines and each server's effective PATH.",
)
@click.option("--server", "servers", multiple=True, help="With --config: only this server.")
@click.option("--dir", "shim_dir", type=click.Path(file_okay=False, path_type=Path), help=_DIR_HELP)
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML policy: trusted_dirs, temp_dirs, sensitive_commands, severity, ignore.",
)
@format_option(
    *FINDINGS_FORMATS,
    help="text for reading; json: versioned envelope; sarif: SARIF 2.1.0 for code scanning.",
)
@fail_on_option
def lint_path_cmd(
    path_value: str | None,
    from_env: bool,
    pid: int | None,
    config_file: Path | None,
    servers: tuple[str, ...],
    shim_dir: Path | None,
    policy_file: Path | None,
    fmt: str,
    fail_on: str,
) -> int:
    """Check a PATH: what each bare command name would run, and who can change that.

    Give exactly one of: a PATH string, --env, --pid N, or --config FILE. Findings (MCS2xx):
    empty, '.' or relative entries; missing entries; temporary, group/world-writable or
    foreign-owned directories (symlinks followed, every component checked); project
    directories (node_modules/.bin, a virtualenv, a checkout's bin) before the system ones;
    the shim dir not first; duplicates; and sensitive commands won by an untrusted
    directory. With --config, also each server's launch line: bare command names,
    programs in unsafe directories, launchers that fetch code at start (npx, uvx, pipx
    run, bunx, docker run with a mutable tag), `sh -c` launch lines and credentials
    written literally (named, never printed). A server's PATH is its env.PATH, else the
    PATH its client passes on; the output says which.

    Exit 0 when nothing is at or above --fail-on (default medium, as review), 1 when
    something is, 2 on bad input.
    """
    given = [path_value is not None, from_env, pid is not None, config_file is not None]
    if sum(given) != 1:
        raise UsageError("give exactly one of: a PATH string, --env, --pid N, --config FILE")
    if servers and config_file is None:
        raise UsageError("--server only goes with --config")
    policy = load_policy(policy_file)
    shim, shim_source = _shim_dir(shim_dir)
    owners = frozenset({0, os.geteuid()})
    notes: list[str] = []
    subject: dict[str, object] = {}
    if pid is not None:
        proc = pathfacts.process_path(pid)
        owners = frozenset({0, proc.uid})
        subject = {"source": f"pid {pid}", "artifact": f"/proc/{pid}/environ"}
        value = proc.path
        if value is None:
            value = "/bin:/usr/bin"
            notes.append(f"process {pid} has no PATH; execvp falls back to {value}")
        cwd = proc.cwd or "/"
    elif config_file is not None:
        value, cwd = "", ""
    else:
        value = os.environ.get("PATH", "") if from_env else (path_value or "")
        subject = {"source": "this process's environment" if from_env else "argument"}
        cwd = os.getcwd()
    settings = LintSettings(
        trusted_dirs=policy.trusted_dirs,
        temp_dirs=policy.temp_dirs,
        sensitive_commands=policy.sensitive_commands,
        shim_dir=shim,
        shim_source=shim_source,
        owners=owners,
        other_shim_dirs=_other_shim_dirs(shim_dir, shim),
    )
    findings: list[Finding]
    if config_file is not None:
        config = load_config(config_file)
        result = lint_config(config, servers, settings, os.environ)
        findings, notes = result.findings, result.notes
        subject = {
            "source": "config",
            "config": str(config_file),
            "client": config.label,
            "servers": len(servers) if servers else len(config.servers),
        }
    else:
        scope = Scope(str(subject["source"]), source=str(subject["source"]))
        findings, facts = lint_path(value, settings, scope, cwd)
        subject["PATH"] = value
        for sh in shadows(facts, settings.sensitive_commands):
            hides = f" (hides {', '.join(sh.hidden)})" if sh.hidden else ""
            notes.append(f"{sh.command} -> {sh.path}{hides}")
    subject["shim_dir"] = f"{shim} ({shim_source})"
    subject["policy"] = str(policy_file) if policy_file else "defaults"
    findings = apply_policy(findings, policy)
    click.echo(findings_renderer(fmt)(Report("lint-path", subject, findings, notes)), nl=False)
    return findings_exit(findings, fail_on)


def _mcpshim_exe() -> str:
    """The absolute path of the running mcpshim executable."""
    argv0 = Path(sys.argv[0])
    if argv0.name.startswith("mcpshim") and argv0.is_file():
        return str(argv0.resolve())
    found = shutil.which("mcpshim")
    if found:
        return os.path.abspath(found)
    beside = Path(sys.executable).parent / "mcpshim"
    if beside.is_file():
        return str(beside)
    raise UsageError("cannot find the mcpshim executable (not argv[0], not on PATH)")


@click.command("wrap-config")
@click.argument("config_file", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--server", "servers", multiple=True, help="Wrap this server (repeatable).")
@click.option("--all", "everything", is_flag=True, help="Wrap every stdio server in FILE.")
@click.option("--dir", "shim_dir", type=click.Path(file_okay=False, path_type=Path), help=_DIR_HELP)
@click.option(
    "--mcp/--no-mcp",
    default=True,
    show_default=True,
    help="Relay and record each server's tool calls (`run --mcp`), or only its execs.",
)
@click.option(
    "--path",
    "path_value",
    metavar="PATH",
    help="The PATH to write after the shim dir for servers without env.PATH (default: the "
    "one their client would pass: launchd's for Claude Desktop on macOS, else this shell's "
    "absolute entries less its activated virtualenv or conda env, plus the directories of "
    "their bare commands).",
)
@click.option("--dry-run", is_flag=True, help="Print the unified diff; write nothing.")
@click.option("--undo", is_flag=True, help="Restore the exact original bytes from the backup.")
def wrap_config(
    config_file: Path,
    servers: tuple[str, ...],
    everything: bool,
    shim_dir: Path | None,
    mcp: bool,
    path_value: str | None,
    dry_run: bool,
    undo: bool,
) -> None:
    """Rewrite MCP client config entries to run under `mcpshim run --mcp` with shims first.

    Each chosen server's command becomes this mcpshim executable and its args
    `run --mcp -- <old command> <old args>` (`run --mcp --dir DIR --` when --dir is given;
    no --mcp with --no-mcp), so review, tree and report file its processes under the tool
    calls that started them. Its env.PATH becomes `<shim dir>:<its PATH>`, deduplicated:
    its own env.PATH if set, else --path, else the PATH its client would pass (launchd's
    `/usr/bin:/bin:/usr/sbin:/sbin` for Claude Desktop on macOS; for the others this
    shell's PATH without relative or empty entries and without what activating a
    virtualenv or conda env put there: the client has its own), plus the directory of its
    bare command when that PATH would not find it. Entries lint-path would flag are warned
    about.
    Remote (url) servers are skipped; an entry already wrapped is left as it is (--undo,
    then wrap again, to change how). Every other key, value, comment and indentation is
    kept: the file is edited only at those values and the result is re-parsed and
    compared before anything is written. The first run keeps the original in
    FILE.mcpshim-backup (never overwritten), the file is replaced atomically with its mode
    kept, and running again changes nothing. --undo restores the original bytes exactly
    and removes the backup.
    """
    config = load_config(config_file)  # a bad file is refused before anything is locked
    if undo:
        if servers or everything:
            raise UsageError("--undo restores the whole file; drop --server/--all")
        if dry_run:
            original = wrapfile.plan_undo(config)
            click.echo(
                wrapconfig.render_diff(config_file, config.raw, original, "restored"), nl=False
            )
            return
        with wrapfile.edit_lock(config_file):
            wrapfile.undo(load_config(config_file))
        click.echo(f"restored {escape(str(config_file))} from its backup; backup removed")
        return
    if bool(servers) == everything:
        raise UsageError("name the servers to wrap with --server NAME, or pass --all")
    shim, shim_source = _shim_dir(shim_dir)
    exe = _mcpshim_exe()
    written: list[clientpath.ClientPath] = []

    def plan_for(current: McpConfig) -> wrapconfig.WrapPlan:
        cp = _client_path(current, servers, shim, path_value)
        written[:] = [cp]
        return wrapconfig.plan_wrap(
            current,
            servers or None,
            shim,
            exe,
            cp.value.split(":", 1)[1] if ":" in cp.value else "",
            explicit_dir=shim_dir is not None,
            mcp=mcp,
        )

    wrote = None
    if dry_run:
        plan = plan_for(config)
        click.echo(
            wrapconfig.render_diff(config_file, plan.original, plan.new, "wrapped"), nl=False
        )
    else:
        # Read, plan and write under the lock: a concurrent run's changes are kept.
        with wrapfile.edit_lock(config_file):
            config = load_config(config_file)
            plan = plan_for(config)
            wrote = wrapfile.apply_plan(plan, config)
    click.echo("\n".join(_wrap_report(plan, dry_run, mcp, shim, shim_source, wrote)))
    if plan.wrapped and written:
        for line in _path_report(written[0], shim, shim_source):
            click.echo(line, err=line.startswith("mcpshim: warning"))


def _client_path(
    config: McpConfig, servers: tuple[str, ...], shim: str, given: str | None
) -> clientpath.ClientPath:
    env_path = os.environ.get("PATH", "")
    skip = clientpath.activated(os.environ)
    if given is not None:
        base, source = given, "--path"
    else:
        base, source = clientpath.client_base(config.client, env_path, skip=skip)
    chosen = [config.server(n) for n in servers] if servers else list(config.servers)
    bare = [s.command or "" for s in chosen if s.stdio and "PATH" not in s.env]
    if given is not None:
        return clientpath.compose(shim, base, source, [], env_path)
    return clientpath.compose(shim, base, source, bare, env_path, skip)


def _path_report(cp: clientpath.ClientPath, shim: str, shim_source: str) -> list[str]:
    """The PATH written to entries without env.PATH, and what lint-path would say of it."""
    out = [f"PATH for entries without env.PATH: {escape(cp.value)} (from {cp.source})"]
    if cp.added:
        out.append(f"note: added for bare commands: {escape(', '.join(cp.added))}")
    for d in cp.left_out:
        out.append(f"note: left out of the servers' PATH: {escape(d)}")
    pol = load_policy(None)
    settings = LintSettings(
        trusted_dirs=pol.trusted_dirs,
        temp_dirs=pol.temp_dirs,
        sensitive_commands=pol.sensitive_commands,
        shim_dir=shim,
        shim_source=shim_source,
        owners=frozenset({0, os.geteuid()}),
    )
    found, _ = lint_path(cp.value, settings, Scope("wrap-config PATH"), "/")
    for f in sorted(found, key=lambda f: -f.level):
        out.append(f"mcpshim: warning: {f.level.label} {f.rule.id}: {escape(f.text)}")
    return out


def _wrap_report(
    plan: wrapconfig.WrapPlan,
    dry_run: bool,
    mcp: bool,
    shim: str,
    shim_source: str,
    wrote: Path | None,
) -> list[str]:
    """What wrap-config did, one line each (printed at once: 20,000 servers, one write)."""
    after = plan.after
    out: list[str] = []
    for name in plan.wrapped:
        verb = "would wrap" if dry_run else "wrapped"
        out.append(f"{verb} {escape(name)}: {launch_line(after.server(name))}")
    for name in plan.already:
        out.append(f"already wrapped {escape(name)}: {launch_line(after.server(name))}")
        if mcp and not wrapconfig.relays_mcp(after.server(name).args):
            out.append(
                f"note: {escape(name)} runs without --mcp (its execs are recorded, not its "
                "tool calls); --undo, then wrap again, to record them"
            )
    for name, why in plan.skipped.items():
        out.append(f"skipped {escape(name)}: {escape(why)}")
    out.append(f"shim dir: {escape(shim)} ({shim_source})")
    if load_manifest(Path(shim)) is None:
        out.append(f"note: no shims installed in {escape(shim)} yet; run `mcpshim install`")
    if wrote is not None:
        out.append(f"backup: {escape(str(wrote))} (restore with --undo)")
    elif not plan.changed:
        out.append("nothing to change")
    return out


COMMANDS = [lint_path_cmd, wrap_config]
