"""The catalogue: every rule mcpshim has, found through this one list of modules.

Nothing registers by being imported: a rule is a `Rule` (`define_rule`: its stable id,
severity and summary) beside the small function that finds it; a per-image check is a
function marked with the rules it may yield (`registry.check`). `rules()` and `checks()`
read the modules named here, in this order, the first time a command needs them (a
review, `mcpshim rules`, a policy's check of its rule ids), so `--help` loads none.
The PATH and client-config rules (MCS2xx) live in pathcheck, which sits above review,
so they are named here by module path.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable
from typing import Any

from mcpshim.review.findings import Rule

__all__ = ["CHECK_MODULES", "MODULES", "checks", "rule", "rules"]

#: the modules of per-image checks, in the order they run
CHECK_MODULES = (
    "mcpshim.review.rules.execpaths",
    "mcpshim.review.rules.shell",
    "mcpshim.review.rules.runners",
    "mcpshim.review.rules.project_code",
    "mcpshim.review.rules.network",
    "mcpshim.review.rules.secrets",
    "mcpshim.review.rules.policy_rules",
    "mcpshim.review.rules.drift",
    "mcpshim.review.rules.trace_rules",
    "mcpshim.review.rules.contain_rules",
    "mcpshim.review.rules.persist_exec",
)
#: every module that defines rules: the checks', then the session-wide ones
MODULES = (
    *CHECK_MODULES,
    "mcpshim.review.rules.session_rules",
    "mcpshim.review.rules.connections",
    "mcpshim.review.rules.file_rules",
    "mcpshim.review.rules.coverage_rules",
    "mcpshim.review.rules.mcp_rules",
    "mcpshim.review.rules.unreadable",
    "mcpshim.review.departure_rules",
    "mcpshim.pathcheck.lint",
    "mcpshim.pathcheck.launch",
)


def _members(names: Iterable[str]) -> Iterable[Any]:
    for name in names:
        yield from vars(importlib.import_module(name)).values()


@functools.cache
def rules() -> dict[str, Rule]:
    """Every rule by id, in id order; an id defined twice (differently) is a bug."""
    found: dict[str, Rule] = {}
    for obj in _members(MODULES):
        if isinstance(obj, Rule):
            seen = found.setdefault(obj.id, obj)
            if seen != obj:
                raise ValueError(f"rule id {obj.id} defined twice")
    return dict(sorted(found.items()))


@functools.cache
def checks() -> tuple[Callable[..., Any], ...]:
    """Every per-image check, in the order its modules and definitions come."""
    out: dict[int, Callable[..., Any]] = {}
    for obj in _members(CHECK_MODULES):
        if callable(obj) and getattr(obj, "check_rules", None):
            out.setdefault(id(obj), obj)
    return tuple(out.values())


def rule(rule_id: str) -> Rule:
    """One rule by id (an unknown id is a usage error)."""
    from mcpshim.errors import UsageError

    try:
        return rules()[rule_id]
    except KeyError:
        raise UsageError(f"unknown rule id {rule_id!r}") from None
