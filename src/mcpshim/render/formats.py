"""The output formats each command offers, by name: the one place `--format` choices come
from, so a new renderer is one entry here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcpshim.family.tree import Forest
from mcpshim.render.dot import render_tree_dot
from mcpshim.render.json import render_findings_json, render_tree_json
from mcpshim.render.report import Report
from mcpshim.render.sarif import render_sarif
from mcpshim.render.text import render_findings_text, render_tree_text

__all__ = ["RENDERERS", "TREE_RENDERERS"]

RENDERERS: dict[str, Callable[[Report], str]] = {
    "text": render_findings_text,
    "json": render_findings_json,
    "sarif": render_sarif,
}

TREE_RENDERERS: dict[str, Callable[[Forest, Mapping[str, Any]], str]] = {
    "text": render_tree_text,
    "json": render_tree_json,
    "dot": render_tree_dot,
}
