"""Drift against a baseline of a routine, approved session."""

from __future__ import annotations

from collections.abc import Iterator

from mcpshim.family.tree import Image
from mcpshim.review.findings import Severity, define_rule
from mcpshim.review.rules.registry import Context, Hit, check
from mcpshim.review.shapes import command_name, matches_any, shape, under

NEW_EXEC = define_rule(
    "MCS115",
    "baseline-new-executable",
    Severity.MEDIUM,
    "An executable ran that the baseline session never ran (for that command).",
    "If the new program is expected, save a new baseline from an approved session.",
    answers=("new",),
)
NEW_SHAPE = define_rule(
    "MCS116",
    "baseline-new-subcommand",
    Severity.LOW,
    "A command ran with a subcommand or argument shape the baseline session never used.",
    "If the new use is expected, save a new baseline from an approved session.",
    answers=(),
)
NEW_CWD = define_rule(
    "MCS117",
    "baseline-new-cwd",
    Severity.LOW,
    "A command ran in a working directory outside every cwd root of the baseline.",
    "If the directory is expected, save a new baseline from an approved session.",
    answers=(),
)


@check(NEW_EXEC, NEW_SHAPE, NEW_CWD)
def baseline_drift(ctx: Context, img: Image) -> Iterator[Hit]:
    base = ctx.baseline
    if base is None:
        return
    name = command_name(img)
    target = img.target.decode("utf-8", "surrogateescape")
    cwd = img.cwd.decode("utf-8", "surrogateescape")
    data = {"command": name, "path": target}
    known = base.executables.get(name)
    if not img.entry:
        return  # ran nothing: no executable, shape or cwd of a program to compare
    if not target:
        pass  # no file on record (a shell only its child's record names): nothing to compare
    elif known is None or not (target in known or matches_any(target, tuple(known))):
        yield Hit(
            NEW_EXEC,
            f"{name} ran {target}, not in the baseline ({base.source})",
            f"{name}\0{target}",
            target,
            data,
        )
    elif (sh := shape(img)) not in base.shapes.get(name, ()):
        yield Hit(
            NEW_SHAPE,
            f"{name} {sh or '(no subcommand)'}: a shape the baseline never used",
            f"{name}\0{sh}",
            target,
            {**data, "shape": sh},
        )
    if cwd and not any(under(cwd, r) for r in base.cwd_roots):
        yield Hit(
            NEW_CWD,
            f"{name} ran in {cwd}, outside the baseline's cwd roots",
            f"{name}\0{cwd}",
            cwd,
            {"command": name, "path": cwd, "cwd": cwd},
        )
