"""Credentials on a command line: redacted in the log, but every local process could read them."""

from __future__ import annotations

from collections.abc import Iterator

from mcpshim.family.tree import Image
from mcpshim.log.redactmark import MARKER_RE
from mcpshim.review.findings import Severity, define_rule
from mcpshim.review.rules.registry import Context, Hit, check
from mcpshim.review.shapes import command_name

CREDENTIAL_ARG = define_rule(
    "MCS110",
    "credential-in-arguments",
    Severity.HIGH,
    "A credential-shaped value was passed as a command-line argument (redacted in the log, but "
    "visible to every local process through /proc and ps while it ran).",
    "Pass secrets through the environment, a credential helper or a file with 0600 permissions, "
    "and rotate the exposed credential.",
    cwe=["CWE-214"],
    confidence="inferred",
    answers=(),
)


@check(CREDENTIAL_ARG)
def credential_argument(ctx: Context, img: Image) -> Iterator[Hit]:
    kinds = set(img.redactions)
    if not kinds:
        for a in img.args:
            kinds.update(m.decode() for m in MARKER_RE.findall(a))
    if not kinds:
        return
    name = command_name(img)
    target = img.target.decode("utf-8", "surrogateescape")
    yield Hit(
        CREDENTIAL_ARG,
        f"{name} got a credential in its arguments ({', '.join(sorted(kinds))})",
        f"{name}\0{','.join(sorted(kinds))}",
        target,
        {"command": name, "path": target, "redacted": sorted(kinds)},
    )
