"""Field 15 of an exec record: the argv of the shell that started the process.

The shims write it (lib.sh, _mcpshim_pargv) as \\x01, then LENGTH:ARGUMENT for each argument,
scrubbed, so every boundary, blank and newline stays what it was. Older shims wrote the
line as dash's `read` had it, its NUL separators lost: anything that is not the format is
that, kept as it is.
"""

from __future__ import annotations

__all__ = ["parent_fields"]


def parent_fields(field: bytes) -> tuple[bytes, tuple[bytes, ...]]:
    """(parent_cmdline, parent_argv) of field 15: the shims write a parent's argv as \x01
    then LENGTH:ARGUMENT for each; anything else is the line an older shim kept (its NUL
    separators lost), as it is."""
    if field[:1] == b"\x01":
        argv = _argv_field(field)
        if argv is not None:
            return b" ".join(argv), argv
    return field, ()


def _argv_field(field: bytes) -> tuple[bytes, ...] | None:
    out: list[bytes] = []
    i, n = 1, len(field)
    while i < n:
        colon = field.find(b":", i, i + 20)
        if colon < 0 or not field[i:colon].isdigit():
            return None
        end = colon + 1 + int(field[i:colon])
        if end > n:
            return None
        out.append(field[colon + 1 : end])
        i = end
    return tuple(out)
