"""The command line: parse, call the core, render, exit. The only package importing click.

Exit codes are decided here and nowhere else: 0 clean, 1 findings at or above --fail-on,
2 a usage, input or environment error (any McpshimError, click's own usage errors, or an
OSError the machine raised: a full disk, a read-only file, a missing directory), always
as one line on stderr, never a traceback. `run` exits with its command's status.

May import: base, log, shim, proc, trace, family, relay, supervise, review, pathcheck, render,
contract, otel, seal.
"""

from __future__ import annotations

import os
import sys

import click

from mcpshim import __version__
from mcpshim.base.display import escape
from mcpshim.cli import (
    approve_cmd,
    completion_cmd,
    export_cmd,
    log_cmd,
    pathlint_cmd,
    report_cmd,
    review_cmd,
    run_cmd,
    sessions_cmd,
    shims_cmd,
)
from mcpshim.errors import EXIT_USAGE, McpshimError

__all__ = ["cli", "click_message", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="mcpshim")
def cli() -> None:
    """Show what a local MCP server really runs.

    Shims on the server's PATH record every exec into a lossless log; review and tree turn
    the log into process families and findings; lint-path checks the PATH a server gets;
    run supervises a server's whole execution family for a session.
    """


_MODULES = (
    shims_cmd,
    log_cmd,
    sessions_cmd,
    run_cmd,
    pathlint_cmd,
    review_cmd,
    report_cmd,
    approve_cmd,
    export_cmd,
    completion_cmd,
)
for _module in _MODULES:
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    """Entry point: the single place where errors become exit codes."""
    try:
        rv = cli.main(args=argv, prog_name="mcpshim", standalone_mode=False)
    except McpshimError as exc:
        click.echo(f"mcpshim: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:  # click's usage errors speak as ours do
        click.echo(f"mcpshim: error: {click_message(exc)}", err=True)
        sys.exit(EXIT_USAGE)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("mcpshim: aborted", err=True)
        sys.exit(EXIT_USAGE)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:
        click.echo(f"mcpshim: error: {describe(exc)}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(rv if isinstance(rv, int) else 0)


def click_message(exc: click.ClickException) -> str:
    """One line: what click said, and where to look (`mcpshim review --help`)."""
    text = escape(" ".join(exc.format_message().split()))
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        text += f" (see `{ctx.command_path} --help`)"
    return text


def describe(exc: OSError) -> str:
    """An OSError as one line: the file it is about, then what the system said."""
    what = exc.strerror or str(exc) or type(exc).__name__
    return f"{escape(os.fsdecode(exc.filename))}: {what}" if exc.filename else what
