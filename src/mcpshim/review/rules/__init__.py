"""Review rules (MCS1xx): small functions over one process image, registered with metadata.

A check gets the review `Context` and one `Image` and yields `Hit`s; review turns hits into
findings grouped by family, with the record that proves each one as evidence. Every hit puts
``command`` and ``path`` into its evidence data so policy ignores can match them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcpshim.family.tree import Image
from mcpshim.review.findings import Rule, Severity
from mcpshim.review.policy import Policy
from mcpshim.shim.install import Manifest

if TYPE_CHECKING:
    from mcpshim.review.baseline import Baseline

__all__ = [
    "CHECKS",
    "Context",
    "Hit",
    "check",
    "command_name",
    "operands",
    "run_checks",
    "shape",
    "subcommand",
    "under",
]


@dataclass(frozen=True)
class Hit:
    rule: Rule
    message: str
    key: str  # what makes two hits the same finding (with the rule id)
    path: str = ""  # the executable, directory or file the hit is about
    data: Mapping[str, Any] = field(default_factory=dict)
    severity: Severity | None = None  # when the rule's default does not fit this hit


@dataclass
class Context:
    """What the checks may consult besides the record; caches make filesystem checks once."""

    policy: Policy
    shim_dirs: tuple[str, ...] = ()
    manifest: Manifest | None = None
    baseline: Baseline | None = None
    cache: dict[tuple[str, str], Any] = field(default_factory=dict)

    def cached(self, kind: str, key: str, compute: Callable[[], Any]) -> Any:
        k = (kind, key)
        if k not in self.cache:
            self.cache[k] = compute()
        return self.cache[k]


Check = Callable[[Context, Image], Iterable[Hit]]
CHECKS: list[tuple[Rule, Check]] = []


def check(*rules: Rule) -> Callable[[Check], Check]:
    """Register a check that may yield hits of these rules."""

    def deco(fn: Check) -> Check:
        CHECKS.append((rules[0], fn))
        return fn

    return deco


def run_checks(ctx: Context, img: Image) -> Iterator[Hit]:
    for _rule, fn in CHECKS:
        yield from fn(ctx, img)


# ---- helpers shared by the rule modules ----------------------------------------------------


def under(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")


def command_name(img: Image) -> str:
    return img.command or os.path.basename(img.target).decode("utf-8", "replace")


# Options that take a value in the next argument, per command (enough to find operands).
_VALUE_OPTS: dict[str, frozenset[str]] = {
    "git": frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"}),
    "npm": frozenset({"--prefix", "-w", "--workspace", "--registry", "--cache"}),
    "make": frozenset({"-C", "-f", "--file", "--directory", "-j", "-I", "-o", "-W"}),
    "node": frozenset({"-r", "--require", "--import", "--loader", "-e", "--eval", "-p"}),
}
_SHORT_VALUE: dict[str, str] = {
    "ssh": "BbcDEeFIiJLlmOoPpQRSWw",
    "scp": "cDFiJlOoPSX",
    "sftp": "BbcDFiJloPRSs",
    "nc": "IiOpqsTVwWXx",
}


def operands(img: Image) -> list[str]:
    """Arguments that are not options or option values, as text (escapes kept by caller)."""
    name = command_name(img)
    long_vals = _VALUE_OPTS.get(name, frozenset())
    short_vals = _SHORT_VALUE.get(name, "")
    out: list[str] = []
    skip = False
    args = [a.decode("utf-8", "surrogateescape") for a in img.args]
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a == "--":
            out += args[i + 1 :]
            break
        if a.startswith("-") and len(a) > 1:
            if a in long_vals:
                skip = True
            elif short_vals and not a.startswith("--"):
                for j, ch in enumerate(a[1:], 1):
                    if ch in short_vals:
                        skip = j == len(a) - 1
                        break
            continue
        out.append(a)
    return out


def subcommand(img: Image) -> str:
    ops = operands(img)
    return ops[0] if ops else ""


def shape(img: Image) -> str:
    """The argument shape baselines record: the subcommand, or a shell's -c inner command word."""
    from mcpshim.review.rules.shell import shell_line

    line = shell_line(img)
    if line is not None:
        words = line.split()
        return f"-c {words[0]}" if words else "-c"
    return subcommand(img)


# Registration happens on import; keep this list in sync with the modules of the package.
from mcpshim.review.rules import (  # noqa: E402
    drift,
    execpaths,
    mcp_rules,
    network,
    policy_rules,
    runners,
    secrets,
    session_rules,
    shell,
    trace_rules,
)

__all__ += ["drift", "execpaths", "network", "policy_rules", "runners", "secrets", "shell"]
__all__ += ["session_rules"]
__all__ += ["trace_rules"]
__all__ += ["mcp_rules"]
