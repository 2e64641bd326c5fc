"""Every rule is a small function (issue 26 item 2): the functions of the rule modules and of
the lock's departures, each under 60 lines, so a rule reads beside its id and summary."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.fixtures.home import SRC

LIMIT = 60
REVIEW = SRC / "mcpshim" / "review"
RULE_FILES = [*sorted((REVIEW / "rules").glob("*.py")), REVIEW / "departures.py"]


def _lengths(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.end_lineno - node.lineno + 1, f"{path.name}:{node.lineno} {node.name}")
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno
    ]


def test_every_rule_function_is_under_sixty_lines() -> None:
    assert len(RULE_FILES) > 10
    long = [(n, where) for path in RULE_FILES for n, where in _lengths(path) if n >= LIMIT]
    assert long == [], sorted(long, reverse=True)
