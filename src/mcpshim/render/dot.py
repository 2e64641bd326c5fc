"""Graphviz dot of a process forest: a node per process, dashed when no shim saw it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcpshim.base.display import escape, quote_argv
from mcpshim.family.tree import Forest
from mcpshim.family.view import argv_of, parent_line

__all__ = ["render_tree_dot"]


def _dot_esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def render_tree_dot(forest: Forest, subject: Mapping[str, Any]) -> str:
    lines = ["digraph mcpshim {", "  rankdir=LR;", '  node [shape=box, fontname="monospace"];']
    for root in forest.roots:
        for node in root.walk():
            if node.known:
                rows = [f"pid {node.pid}"]
                for i in node.images:
                    rows += [f"[{i.source}] {quote_argv(argv_of(i))}", escape(i.target)]
                    rows += [f"started by {parent_line(i)}"] if i.parent_cmdline else []
                style = "dashed" if "shim" not in node.sources else "solid"
            else:
                rows, style = [f"pid {node.pid}", "(parent not in log)"], "dotted"
            label = "\\n".join(_dot_esc(r) for r in rows)
            lines.append(f'  n{node.id} [label="{label}", style={style}];')
            lines.extend(f"  n{node.id} -> n{c.id};" for c in node.children)
    lines.append("}")
    return "\n".join(lines) + "\n"
