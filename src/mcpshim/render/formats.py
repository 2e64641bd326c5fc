"""The output formats each command offers, by name: the one place `--format` choices come
from, so a new renderer is one entry here. The renderers are imported when one renders,
so a command's `--help` loads none of them (nor the review code they format).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpshim.family.tree import Forest
    from mcpshim.render.report import Report

__all__ = ["FINDINGS_FORMATS", "TREE_FORMATS", "findings_renderer", "tree_renderer"]

#: name -> (module, function) of each findings renderer
_FINDINGS = {
    "text": ("text", "render_findings_text"),
    "json": ("json", "render_findings_json"),
    "sarif": ("sarif", "render_sarif"),
}
_TREE = {
    "text": ("text", "render_tree_text"),
    "json": ("json", "render_tree_json"),
    "dot": ("dot", "render_tree_dot"),
}
FINDINGS_FORMATS = tuple(_FINDINGS)
TREE_FORMATS = tuple(_TREE)


def _load(table: Mapping[str, tuple[str, str]], fmt: str) -> Any:
    module, name = table[fmt]
    return getattr(importlib.import_module(f"mcpshim.render.{module}"), name)


def findings_renderer(fmt: str) -> Callable[[Report], str]:
    fn: Callable[[Report], str] = _load(_FINDINGS, fmt)
    return fn


def tree_renderer(fmt: str) -> Callable[[Forest, Mapping[str, Any]], str]:
    fn: Callable[[Forest, Mapping[str, Any]], str] = _load(_TREE, fmt)
    return fn
