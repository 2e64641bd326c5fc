"""Review rules (MCS1xx and the session, trace and MCP rules): one small module per concern,
each check registered with its rule ids when its module is imported (registry).

Importing this package registers them all; `review.engine` runs them.
"""

from __future__ import annotations

from mcpshim.review.rules import (
    contain_rules,
    coverage_rules,
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
from mcpshim.review.rules.registry import CHECKS, Context, Hit, check, run_checks

__all__ = [
    "CHECKS",
    "Context",
    "Hit",
    "check",
    "contain_rules",
    "coverage_rules",
    "drift",
    "execpaths",
    "mcp_rules",
    "network",
    "policy_rules",
    "run_checks",
    "runners",
    "secrets",
    "session_rules",
    "shell",
    "trace_rules",
]
