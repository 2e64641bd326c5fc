"""Trace rules (MCS4xx): what `mcpshim run --trace` saw that shims and sampling cannot.

Per-image and pure over the image, like the other checks: the tracer writes what the order
of events means into each record (a shim's exec, a PATH-search step, a final failure), and
`trace_merge` turns that into the image's `source` (see there).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

from mcpshim.family import trace_merge as _trace_merge  # registers the trace images with tree
from mcpshim.family.tree import Image
from mcpshim.review.findings import Severity, define_rule
from mcpshim.review.rules.registry import Context, Hit, check
from mcpshim.review.rules.shell import approved_line, constructs
from mcpshim.review.shapes import command_name, shell_line, under

__all__ = ["ABSOLUTE_SHELL", "EXEC_FAILED", "SEARCH_WRITABLE", "UNEXPLAINED"]
del _trace_merge

ABSOLUTE_SHELL = define_rule(
    "MCS401",
    "shell-line-by-absolute-path",
    Severity.LOW,
    "A shell was started by absolute path with a -c command line, past every shim: only the "
    "tracer saw the line (typical of Node's child_process.exec and Python's shell=True). "
    "Low when the line composes several programs, medium when a value of the tool call's "
    "arguments is spliced into it; a single command is info.",
    "Run the program directly with an argument vector (execFile / spawn without a shell); if "
    "the shell is needed, approve the exact line in the policy ([commands.sh].args).",
    cwe=["CWE-78", "CWE-778"],
    confidence="inferred",
    answers=(),
)
SEARCH_WRITABLE = define_rule(
    "MCS402",
    "path-search-through-writable-dir",
    Severity.HIGH,
    "A PATH search tried a temporary or writable directory before it found the program: "
    "anyone who can write there can plant a program of that name and it runs instead.",
    "Remove temporary and writable directories from the server's PATH (mcpshim lint-path), "
    "or call the program by its absolute path.",
    cwe=["CWE-426", "CWE-427"],
    answers=("new",),
)
EXEC_FAILED = define_rule(
    "MCS403",
    "exec-failed",
    Severity.LOW,
    "A process tried to run a program and the exec failed (missing, not executable, or "
    "not a valid executable).",
    "Check the command the tool builds; a failing exec is often a missing dependency or a "
    "wrong path, and the fallback it takes next may not be the one you expect.",
    cwe=["CWE-754"],
    answers=(),
)
UNEXPLAINED = define_rule(
    "MCS404",
    "unexplained-family-member",
    Severity.MEDIUM,
    "A process was in the session's family, but no exec or fork record from the tracer or a "
    "shim explains how it got there.",
    "Look at the process's evidence (seen_as/seen_at in the log); a gap in tracing means "
    "it started before tracing, escaped it, or was moved into the family from outside.",
    cwe=["CWE-778"],
    answers=(),
)


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


@check(ABSOLUTE_SHELL)
def absolute_shell(ctx: Context, img: Image) -> Iterator[Hit]:
    if img.source != "trace" or b"/" not in img.argv0:
        return
    line = shell_line(img)
    if line is None:
        return
    name = command_name(img)
    target = _text(img.target)
    parts = constructs(line)
    how = f" ({', '.join(parts)})" if parts else ""
    # One plain command is routine (what Node's exec() and npm's scripts start); a line
    # that composes several programs is what needs a look, as with MCS105.
    yield Hit(
        ABSOLUTE_SHELL,
        f"{_text(img.argv0)} -c started by absolute path, no shim saw it{how}: {line}",
        f"{name}\0{line}",
        target,
        {"command": name, "path": target, "inner": line, "constructs": parts},
        None if parts and not approved_line(ctx, img) else Severity.INFO,
    )


def _dir_risk(ctx: Context, d: str) -> str | None:
    """Why a directory on a search path is open to others, or None."""

    def compute() -> str | None:
        for p in dict.fromkeys([d, os.path.realpath(d)]):
            for t in ctx.policy.temp_dirs:
                if under(p, t):
                    return f"{d} is in temporary directory {t}"
        probe = d
        while True:
            try:
                mode = os.stat(probe).st_mode
            except OSError:
                parent = os.path.dirname(probe)
                if parent == probe:
                    return None
                probe = parent
                continue
            if mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode & stat.S_ISVTX:
                return (
                    f"{probe} is group- or world-writable"
                    if probe == d
                    else f"{d} does not exist and {probe}, where it could be created, is writable"
                )
            return None

    result: str | None = ctx.cached("trace-dir-risk", d, compute)
    return result


@check(SEARCH_WRITABLE)
def search_through_writable(ctx: Context, img: Image) -> Iterator[Hit]:
    """The steps a PATH search tried before the exec they led to (folded into its image
    by the model), or a step of a shim's exec (its image came before the trace)."""
    if img.source.startswith("trace-search/"):
        tried_all = [_text(img.argv0)]
    else:
        tried_all = [_text(p) for p, _errno in img.attempts]
    for tried in tried_all:
        d = os.path.dirname(tried)
        if not d.startswith("/") or d in ctx.shim_dirs:
            continue
        why = _dir_risk(ctx, d)
        if why is None:
            continue
        name = os.path.basename(tried)
        yield Hit(
            SEARCH_WRITABLE,
            f"the PATH search for {name} tried {tried} before finding it: {why}",
            f"{name}\0{d}",
            d,
            {"command": name, "path": d, "tried": tried},
        )


@check(EXEC_FAILED)
def exec_failed(ctx: Context, img: Image) -> Iterator[Hit]:
    if not img.source.startswith("trace-failed/"):
        return
    errno = img.source.partition("/")[2]
    tried = _text(img.argv0)
    name = os.path.basename(tried)
    yield Hit(
        EXEC_FAILED,
        f"exec of {tried} failed ({errno})",
        f"{tried}\0{errno}",
        tried,
        {"command": name, "path": tried, "errno": errno},
    )


@check(UNEXPLAINED)
def unexplained(ctx: Context, img: Image) -> Iterator[Hit]:
    if img.source != "trace-gap":
        return
    what = _text(img.target) or _text(img.argv0) or "?"
    yield Hit(
        UNEXPLAINED,
        f"pid {img.pid} ({what}) was in the family with no exec or fork record explaining it",
        f"{img.pid}\0{img.start}\0{what}",
        what,
        {"command": img.command, "path": what},
    )
