"""What the policy allows per command: targets, subcommands/argument shapes, cwd roots."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator

from mcpshim.family.tree import Image
from mcpshim.review.findings import Severity, define_rule
from mcpshim.review.rules.registry import Context, Hit, check
from mcpshim.review.shapes import command_name, matches_any, subcommand, under

TARGET = define_rule(
    "MCS112",
    "target-not-allowed",
    Severity.MEDIUM,
    "A command resolved to an executable the policy does not list for it.",
    "Find out why the command ran a different program; add the path to [commands.NAME].targets "
    "if it is expected.",
    cwe=["CWE-426"],
    answers=("new",),
)
ARGS = define_rule(
    "MCS113",
    "arguments-not-allowed",
    Severity.MEDIUM,
    "A command ran with a subcommand or argument shape the policy does not list for it.",
    "Add the subcommand to [commands.NAME].subcommands or a glob to .args if it is expected; "
    "otherwise find the tool call that asked for it.",
    answers=(),
)
CWD = define_rule(
    "MCS114",
    "cwd-not-allowed",
    Severity.MEDIUM,
    "A command ran outside the working directories the policy allows.",
    "Add the directory to cwd_roots (or [commands.NAME].cwd_roots) if it is expected.",
    answers=(),
)
UNLISTED = define_rule(
    "MCS118",
    "command-not-in-policy",
    Severity.MEDIUM,
    "strict_commands is set and a command ran that has no [commands.NAME] table.",
    "Add a [commands.NAME] table describing the command, or stop the server from running it.",
    answers=(),
)


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


@check(TARGET, ARGS, CWD, UNLISTED)
def policy_allows(ctx: Context, img: Image) -> Iterator[Hit]:
    name = command_name(img)
    target = _text(img.target)
    cwd = _text(img.cwd)
    pol = ctx.policy
    cp = pol.command(name)
    data = {"command": name, "path": target}
    if cp is None and pol.strict_commands:
        yield Hit(
            UNLISTED,
            f"{name} ran ({target}) but the policy does not describe it",
            name,
            target,
            data,
        )
    if cp is not None and cp.targets and not matches_any(target, cp.targets):
        yield Hit(
            TARGET,
            f"{name} ran {target}; the policy allows {', '.join(cp.targets)}",
            f"{name}\0{target}",
            target,
            data,
        )
    if cp is not None and (cp.subcommands or cp.args):
        sub = subcommand(img)
        joined = " ".join(_text(a) for a in img.args)
        if sub not in cp.subcommands and not any(fnmatch.fnmatchcase(joined, g) for g in cp.args):
            shown = sub or "(no subcommand)"
            yield Hit(
                ARGS,
                f"{name} {shown}: not an allowed subcommand or argument shape",
                f"{name}\0{sub}",
                target,
                {**data, "subcommand": sub},
            )
    roots = (cp.cwd_roots if cp is not None and cp.cwd_roots else ()) or pol.cwd_roots
    if roots and cwd and not any(under(cwd, r) for r in roots):
        yield Hit(
            CWD,
            f"{name} ran in {cwd}, outside the allowed roots {', '.join(roots)}",
            f"{name}\0{cwd}",
            cwd,
            {"command": name, "path": cwd, "cwd": cwd},
        )
