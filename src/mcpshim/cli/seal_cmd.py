"""mcpshim log seal, log verify, log anchors (subcommands of `log`)."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import click

from mcpshim.base import fdio
from mcpshim.base.display import dumps, escape
from mcpshim.base.fdio import read_regular
from mcpshim.cli.common import format_option, location_options, sub_locations
from mcpshim.errors import EXIT_CLEAN, EXIT_FINDINGS, InputError, UsageError
from mcpshim.seal import anchors, follow, keys, state, view
from mcpshim.seal.sealer import Written
from mcpshim.seal.verify import verify as verify_log

__all__ = ["SUBCOMMANDS"]

_STATE_HELP = "The sealer's state file. Default: seal/ under the user state directory."


def _say(message: str) -> None:
    click.echo(f"mcpshim: {escape(message)}", err=True)


def _anchor_config(
    anchor_cmd: str | None, no_anchor: bool, socket: str | None, interval: float | None
) -> state.AnchorConfig:
    if anchor_cmd is not None and no_anchor:
        raise UsageError("--anchor-cmd and --no-anchor contradict each other")
    cfg = state.AnchorConfig()
    if anchor_cmd is not None:
        cfg = state.AnchorConfig(mode="cmd", cmd=anchor_cmd)
    elif no_anchor:
        cfg = state.AnchorConfig(mode="none")
    elif socket is not None:
        cfg = state.AnchorConfig(socket=socket)
    if interval is not None:
        cfg = state.AnchorConfig(cfg.mode, cfg.socket, cfg.cmd, interval)
    return cfg


def _store(fd: int, path: Path, verifier: str) -> bool:
    """The verifier into the file claimed for it; False (the file removed) when it could not
    be written whole (a full disk): the key exists now, so the verifier is shown instead."""
    try:
        try:
            fdio.write_all(fd, (verifier + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.unlink()
        click.echo(
            f"mcpshim: warning: {escape(str(path))}: cannot write the verifier "
            f"({exc.strerror}); it is shown below instead, once",
            err=True,
        )
        return False
    return True


def _claim(path: Path) -> int:
    """The verifier's file, created (0600) before the key exists: a key whose verifier
    cannot be written must never come to be."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise UsageError(f"{path} exists; the verifier is never written over a file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None


@click.command("seal")
@location_options
@click.option("--init", is_flag=True, help="Start sealing this log with a new key.")
@click.option(
    "--verifier-out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --init: write the verifier to this new file (0600) instead of stdout. Keep it "
    "away from this account: other media, another host, a password manager.",
)
@click.option("--force", is_flag=True, help="With --init: replace the key of a sealed log.")
@click.option(
    "--period",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="With --init: seconds per key epoch (a key is erased when its epoch is over).",
)
@click.option("--follow", "follow_", is_flag=True, help="Seal continuously (`run` starts this).")
@click.option(
    "--stop-on-eof", is_flag=True, hidden=True, help="With --follow: stop at EOF on stdin."
)
@click.option("--anchor-cmd", help="Send each anchor line to this command's stdin (sh -c).")
@click.option("--no-anchor", is_flag=True, help="Send no anchors.")
@click.option("--syslog-socket", help="The system log's socket for logger -u (default /dev/log).")
@click.option(
    "--anchor-interval",
    type=click.FloatRange(min=0),
    help="Seconds between anchors while sealing continuously (default 10; the last seal of "
    "a session is always anchored).",
)
@click.option(
    "--state", "state_file", type=click.Path(dir_okay=False, path_type=Path), help=_STATE_HELP
)
@click.pass_context
def seal(
    ctx: click.Context,
    shim_dir: Path | None,
    log_dir: Path | None,
    init: bool,
    verifier_out: Path | None,
    force: bool,
    period: int,
    follow_: bool,
    stop_on_eof: bool,
    anchor_cmd: str | None,
    no_anchor: bool,
    syslog_socket: str | None,
    anchor_interval: float | None,
    state_file: Path | None,
) -> int:
    """Seal what was appended to the log since the last seal.

    \b
    Each seal is a record appended to the segment it covers: the byte range, its SHA-256,
    the previous seal's hash, and an HMAC under a key that moves forward every seal (the
    key used is erased). The sealing process is non-dumpable, so other processes of this
    user cannot read its keys. `mcpshim run` seals its log continuously once it is sealed;
    for shims used without `run`, call this from cron or a systemd user timer (see
    docs/threat-model.md).

    \b
    --init prints the verifier once: keep it where this account cannot reach it. Each
    seal's chain head also goes to the system log (logger), or to --anchor-cmd; where no
    system log keeps entries, mcpshim says so once.
    """
    loc = sub_locations(ctx, shim_dir, log_dir)
    path = state_file or state.default_state_path(loc.log_dir)
    configured = any(x is not None for x in (anchor_cmd, syslog_socket, anchor_interval))
    cfg = _anchor_config(anchor_cmd, no_anchor, syslog_socket, anchor_interval)
    if not init and (verifier_out is not None or force):
        raise UsageError("--verifier-out and --force go with --init")
    if init:
        if follow_:
            raise UsageError("--init and --follow: initialise first, then follow")
        fd = _claim(verifier_out) if verifier_out is not None else -1
        try:
            verifier, written = follow.init(loc, path, cfg, force, _say, period)
        except BaseException:
            if verifier_out is not None:
                os.close(fd)
                verifier_out.unlink()
            raise
        if verifier_out is not None and _store(fd, verifier_out, verifier):
            click.echo(f"verifier written to {escape(str(verifier_out))}", err=True)
        else:
            click.echo(verifier)
            click.echo(
                "mcpshim: that is the verifier (`mcpshim log verify --key`): it is shown once "
                "and kept nowhere; store it away from this account",
                err=True,
            )
        _report(written)
        return EXIT_CLEAN
    if configured or no_anchor:
        follow.update_anchor(path, cfg)
    if follow_:
        return follow.follow(loc, path, _say, stop_on_eof)
    done = follow.seal_once(loc, path, _say)
    if done is None:
        click.echo("another sealer (a `mcpshim run`) holds this log and seals it", err=True)
        return EXIT_CLEAN
    if not done:
        click.echo("nothing new to seal", err=True)
    _report(done)
    return EXIT_CLEAN


def _report(written: list[Written]) -> None:
    for w in written:
        s = w.seal
        click.echo(f"sealed {escape(w.where)}: seal {s.n} over {s.start}..{s.end}", err=True)


def _verifiers(values: tuple[str, ...]) -> list[keys.Verifier]:
    """Each --key: the verifier itself, a file holding it, or - for stdin (a key on the
    command line is visible to this user's processes while verify runs)."""
    out = []
    for v in values:
        if v.startswith(keys.VERIFIER_PREFIX):
            out.append(keys.Verifier.parse(v))
        elif v == "-":
            out.append(keys.Verifier.parse(sys.stdin.readline()))
        else:
            try:
                text = read_regular(Path(v)).decode(errors="replace")
            except OSError as exc:
                raise InputError(f"{v}: cannot read the verifier: {exc.strerror}") from None
            out.append(keys.Verifier.parse(text))
    return out


@click.command("verify")
@location_options
@click.option(
    "--key",
    "key_values",
    multiple=True,
    metavar="VERIFIER|FILE|-",
    help="The verifier `log seal --init` printed (or a file holding it, or - for stdin): "
    "every seal's MAC is checked. Repeat for a log sealed under several keys.",
)
@click.option(
    "--anchors",
    "anchor_source",
    metavar="journald|FILE",
    help="Check the chain against the anchors in the journal, or in FILE (a syslog file, or "
    "the file an --anchor-cmd appended to).",
)
@click.option(
    "--state", "state_file", type=click.Path(dir_okay=False, path_type=Path), help=_STATE_HELP
)
@format_option("text", "json", help="text for reading; json for tools.")
@click.pass_context
def verify(
    ctx: click.Context,
    shim_dir: Path | None,
    log_dir: Path | None,
    key_values: tuple[str, ...],
    anchor_source: str | None,
    state_file: Path | None,
    fmt: str,
) -> int:
    """Check the log against its seals: exit 0 verified, 1 tampering or gaps, 2 input error.

    \b
    Without --key the plain chain is checked: edits, reorders, removals and insertions in
    sealed ranges, a segment or seal deleted, a tail cut (against the sealer's state). A
    chain recomputed from scratch passes it; --key catches that, and --anchors catches a
    whole log replaced even when the state was replaced too. Names the first bad byte
    range, the records in it and their sessions, what was never sealed, and the window
    (how far the seals ran behind).
    """
    loc = sub_locations(ctx, shim_dir, log_dir)
    verifiers = _verifiers(key_values)
    found = anchors.read_anchors(anchor_source) if anchor_source else None
    st = state.load(state_file or state.default_state_path(loc.log_dir))
    result = verify_log(loc, verifiers, found, st)
    log = str(loc.log_dir)
    if fmt == "json":
        click.echo(dumps(view.verification_json(result, log), indent=2))
    else:
        click.echo(view.verification_text(result, log), nl=False)
    return EXIT_CLEAN if result.verdict == "verified" else EXIT_FINDINGS


@click.command("anchors")
@click.option(
    "--from",
    "source",
    default="journald",
    show_default=True,
    metavar="journald|FILE",
    help="Where to read anchors back from.",
)
@format_option("text", "json", help="text for reading; json for tools.")
def anchors_(source: str, fmt: str) -> None:
    """List the anchors that can be read back (to check `log verify --anchors` against)."""
    found = anchors.read_anchors(source)
    if fmt == "json":
        click.echo(dumps(view.anchors_json(found), indent=2))
    else:
        click.echo(view.anchors_text(found), nl=False)


SUBCOMMANDS = [seal, verify, anchors_]
