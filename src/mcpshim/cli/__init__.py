"""The command line: parse, call the core, render, exit. The only package importing click.

Exit codes are decided here and nowhere else: 0 clean, 1 findings at or above --fail-on,
2 a usage or input error (any McpshimError, or click's own usage errors).

May import: base, log, shim, proc, trace, family, relay, supervise, review, pathcheck, render,
contract.
"""

from __future__ import annotations

import sys

import click

from mcpshim import __version__
from mcpshim.cli import (
    approve_cmd,
    log_cmd,
    pathlint_cmd,
    report_cmd,
    review_cmd,
    run_cmd,
    shims_cmd,
)
from mcpshim.errors import EXIT_USAGE, McpshimError

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="mcpshim")
def cli() -> None:
    """Show what a local MCP server really runs.

    Shims on the server's PATH record every exec into a lossless log; review and tree turn
    the log into process families and findings; lint-path checks the PATH a server gets;
    run supervises a server's whole execution family for a session.
    """


for _module in (shims_cmd, log_cmd, run_cmd, pathlint_cmd, review_cmd, report_cmd, approve_cmd):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    """Entry point: the single place where errors become exit codes."""
    try:
        rv = cli.main(args=argv, prog_name="mcpshim", standalone_mode=False)
    except McpshimError as exc:
        click.echo(f"mcpshim: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("mcpshim: aborted", err=True)
        sys.exit(EXIT_USAGE)
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(rv if isinstance(rv, int) else 0)
