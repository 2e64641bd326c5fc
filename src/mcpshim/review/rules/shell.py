"""Shell wrappers: `sh -c LINE` hides a whole program in one argument; show and dissect it."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator

from mcpshim.family.tree import Image
from mcpshim.review.findings import Severity, define_rule
from mcpshim.review.rules.registry import Context, Hit, check
from mcpshim.review.shapes import command_name, shell_line

COMPOSED = define_rule(
    "MCS105",
    "shell-composed-line",
    Severity.LOW,
    "A shell ran a composed command line (-c) with substitution, lists, pipes, redirections "
    "or background jobs: one approval covers several programs. Medium when a value of the "
    "tool call's arguments is spliced into the line (quoting decides what it becomes).",
    "Run each program directly with an argument vector (no shell), or approve the exact line "
    "in the policy ([commands.sh].args).",
    cwe=["CWE-78"],
    confidence="inferred",
    answers=(),
)
SIMPLE = define_rule(
    "MCS106",
    "shell-command-line",
    Severity.INFO,
    "A shell ran a single command through -c.",
    "Run the program directly with an argument vector instead of through a shell.",
    cwe=["CWE-78"],
    confidence="inferred",
    answers=(),
)


def approved_line(ctx: Context, img: Image) -> bool:
    """The policy lists this shell's argument shape ([commands.NAME].args globs over the
    arguments joined with blanks): the line someone approved, so it is routine."""
    cp = ctx.policy.command(command_name(img))
    joined = " ".join(a.decode("utf-8", "surrogateescape") for a in img.args)
    return cp is not None and any(fnmatch.fnmatchcase(joined, g) for g in cp.args)


def constructs(line: str) -> list[str]:
    """The composing constructs outside quotes (substitution also inside double quotes)."""
    found: dict[str, None] = {}
    quote = ""
    i = 0
    n = len(line)
    while i < n:
        ch = line[i]
        nxt = line[i + 1] if i + 1 < n else ""
        if quote == "'":
            if ch == "'":
                quote = ""
        elif ch == "\\":
            i += 2
            continue
        elif ch == "$" and nxt == "(":
            found["command substitution $(...)"] = None
        elif ch == "`":
            found["command substitution `...`"] = None
        elif quote == '"':
            if ch == '"':
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in ";\n":
            found["command list ;"] = None
        elif ch == "&" and nxt == "&":
            found["conditional &&"] = None
            i += 2
            continue
        elif ch == "|" and nxt == "|":
            found["conditional ||"] = None
            i += 2
            continue
        elif ch == "|":
            found["pipe |"] = None
        elif ch in "<>":
            found["redirection " + ch] = None
            if nxt == "&":
                i += 2
                continue
        elif ch == "&":
            if nxt == ">":
                found["redirection >"] = None
            else:
                found["background &"] = None
        i += 1
    return list(found)


@check(COMPOSED, SIMPLE)
def shell_wrapper(ctx: Context, img: Image) -> Iterator[Hit]:
    """A shell's -c line. A traced shell started by absolute path is MCS401's (one
    statement per process: the line and that no shim saw it)."""
    line = shell_line(img)
    if line is None or (img.source == "trace" and b"/" in img.argv0):
        return
    name = command_name(img)
    parts = constructs(line)
    data = {"command": name, "path": img.target.decode("utf-8", "surrogateescape"), "inner": line}
    if img.source != "shim" and b"/" in img.argv0:
        # sampled, or known from its child's record: one statement, how it ran included
        name = f"{name} (started by absolute path, past any shim)"
    if parts and approved_line(ctx, img):
        yield Hit(COMPOSED, f"{name} -c runs a composed line the policy approves: {line}",
                  f"{name}\0{line}", data["path"], {**data, "constructs": parts},
                  Severity.INFO)  # fmt: skip
    elif parts:
        yield Hit(
            COMPOSED,
            f"{name} -c runs a composed line ({', '.join(parts)}): {line}",
            f"{name}\0{line}",
            data["path"],
            {**data, "constructs": parts},
        )
    else:
        yield Hit(SIMPLE, f"{name} -c runs: {line}", f"{name}\0{line}", data["path"], data)
