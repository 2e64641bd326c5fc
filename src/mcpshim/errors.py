"""One error root; the CLI maps it to an exit code in one place."""

from __future__ import annotations

__all__ = ["EXIT_CLEAN", "EXIT_FINDINGS", "EXIT_USAGE", "InputError", "McpshimError", "UsageError"]

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class McpshimError(Exception):
    """Anything mcpshim reports to the user instead of a traceback."""

    exit_code = EXIT_USAGE


class UsageError(McpshimError):
    """The command line asks for something that cannot be done."""


class InputError(McpshimError):
    """A file or value given to mcpshim is missing, malformed or unsafe."""
