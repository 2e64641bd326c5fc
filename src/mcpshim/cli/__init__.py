"""The command line: parse, call the core, render, exit. The only package importing click.

Exit codes are decided here and nowhere else: 0 clean, 1 findings at or above --fail-on,
2 a usage, input or environment error (any McpshimError, click's own usage errors, or an
OSError the machine raised: a full disk, a read-only file, a missing directory), always
as one line on stderr, never a traceback. `run` exits with its command's status.

May import: base, log, shim, proc, trace, family, relay, supervise, review, pathcheck, render,
contract, otel, seal, sandbox.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import traceback
from typing import NoReturn

import click

from mcpshim import __version__
from mcpshim.base.display import escape
from mcpshim.errors import EXIT_USAGE, McpshimError

__all__ = ["cli", "click_message", "exit_when_done", "main", "quick_exit"]


#: Each command, the module that defines it (its COMMANDS, imported when the command runs: a
#: command's start-up pays for its own imports, not every command's) and the first paragraph
#: of its help, which `mcpshim --help` lists without importing any command module
#: (tests/cli/test_lazy.py checks the table against the modules, tests/cli/test_help.py
#: the listing against click's own).
COMMAND_TABLE = {
    "install": ("shims_cmd", "Write one shim per COMMAND (default: git ssh sh node npm)."),
    "uninstall": ("shims_cmd", "Remove shims (only files mcpshim wrote; the log stays)."),
    "list": ("shims_cmd", "Each shim, its target, and whether the target still matches the "
             "manifest; then the shim library every shim sources."),
    "path": ("shims_cmd", "Print the line that puts the shim directory first on PATH."),
    "log": ("log_cmd", "Print the exec log (all segments, oldest first), streaming."),
    "sessions": ("sessions_cmd", "List the sessions in the log, newest first."),
    "run": ("run_cmd", "Run COMMAND as a supervised session and record its whole execution "
            "family."),
    "snapshot": ("run_cmd", "Save the process family of PID: the ps / pgrep -P / lsof "
                 "procedure in one step."),
    "lint-path": ("pathlint_cmd", "Check a PATH: what each bare command name would run, and "
                  "who can change that."),
    "wrap-config": ("pathlint_cmd", "Rewrite MCP client config entries to run under `mcpshim "
                    "run --mcp` with shims first."),
    "tree": ("review_cmd", "Rebuild process families from the exec log."),
    "review": ("review_cmd", "Review the exec log: findings per process family, with the "
               "records that prove them."),
    "rules": ("review_cmd", "List every rule: stable id, default severity and confidence, "
              "summary and remediation (the severity rubric: docs/verdicts.md)."),
    "policy": ("review_cmd", "Review policies (TOML; `policy init` writes one with every key "
               "explained)."),
    "baseline": ("review_cmd", "Baselines of routine, approved sessions, for drift findings "
                 "in review."),
    "report": ("report_cmd", "Write a report of one session relayed by `mcpshim run --mcp`, "
               "and say which."),
    "approve": ("approve_cmd", "Show a relayed session's approval cards and write the "
                "approval into the lock."),
    "export": ("export_cmd", "Send recorded sessions to the telemetry systems a team already "
               "runs."),
    "completion": ("completion_cmd", "Print the completion script for SHELL (commands, "
                   "options, choices)."),
}  # fmt: skip
COMMAND_MODULES = {name: module for name, (module, _) in COMMAND_TABLE.items()}


#: click >= 8.2 raises it for a group given no arguments (its message: the whole help);
#: older clicks print the help and exit 0, as mcpshim does with it
_NO_ARGS: tuple[type[click.UsageError], ...] = tuple(
    e for e in [getattr(click.exceptions, "NoArgsIsHelpError", None)] if e is not None
)

#: set by `--debug` (an option, never the environment: an agent sets that)
_DEBUG: list[bool] = []
#: set by a command whose process has nothing left to finish once it returns (`run`)
_DONE: list[bool] = []


class _Commands(click.Group):
    """The command group, each command's module imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMAND_MODULES})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if cmd_name not in self.commands and module is not None:
            for command in importlib.import_module(f"mcpshim.cli.{module}").COMMANDS:
                self.add_command(command)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing, of the commands loaded and the table's stand-ins for the
        rest (each its help's first paragraph, all click's short help reads)."""
        listed = {
            name: self.commands.get(name) or click.Command(name, help=COMMAND_TABLE[name][1])
            for name in self.list_commands(ctx)
        }
        click.Group(commands=listed).format_commands(ctx, formatter)


@click.group(
    cls=_Commands,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="mcpshim")
@click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda ctx, _param, value: _DEBUG.append(True) if value else None,
    help="On an error, print the traceback behind its one line (for a bug report).",
)
def cli() -> None:
    """Show what a local MCP server really runs.

    Shims on the server's PATH record every exec into a lossless log; review and tree turn
    the log into process families and findings; lint-path checks the PATH a server gets;
    run supervises a server's whole execution family for a session.
    """


def exit_when_done() -> None:
    """Let the process end as soon as the command returns (`quick_exit`)."""
    _DONE.append(True)


def quick_exit(code: int) -> NoReturn:
    """End the process now, its output flushed: the interpreter's own teardown (freeing
    every object and module one by one) took 100 to 170 ms after a Playwright session's
    `run`, all of it between the server's exit and the client seeing run's. Not under
    coverage, whose data is written at that teardown."""
    if "coverage" not in sys.modules:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Entry point: the single place where errors become exit codes."""
    _DEBUG.clear()
    _DONE.clear()
    try:
        rv = cli.main(args=argv, prog_name="mcpshim", standalone_mode=False)
    except McpshimError as exc:
        _traceback()
        click.echo(f"mcpshim: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except _NO_ARGS as exc:  # a group named alone (bare `mcpshim`): its help, as --help
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        sys.exit(0)
    except click.ClickException as exc:  # click's usage errors speak as ours do: one line,
        click.echo(f"mcpshim: error: {click_message(exc)}", err=True)  # no traceback
        sys.exit(EXIT_USAGE)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("mcpshim: aborted", err=True)
        sys.exit(EXIT_USAGE)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:
        _traceback()
        click.echo(f"mcpshim: error: {describe(exc)}", err=True)
        sys.exit(EXIT_USAGE)
    code = rv if isinstance(rv, int) else 0
    if _DONE and argv is None:  # the process's own entry point, not a caller in-process
        quick_exit(code)
    sys.exit(code)


def _traceback() -> None:
    """Under --debug, the traceback of the exception being handled, before its one line."""
    if _DEBUG:
        traceback.print_exc(file=sys.stderr)


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
