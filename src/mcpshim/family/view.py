"""Views of a process forest: pstree-like text, a versioned JSON envelope, Graphviz dot.

All process-derived text goes through display.escape/quote_argv; JSON keeps exact bytes in
`*_b64` siblings (see logview). Each image says which source recorded it (shim, observed).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from mcpshim import __version__
from mcpshim.base.display import b64_fields, dumps, escape, json_text, quote_argv
from mcpshim.family.tree import Forest, Image, Node
from mcpshim.log.logview import entity_id

__all__ = [
    "TREE_RENDERERS",
    "TREE_SCHEMA_ID",
    "argv_of",
    "evidence_line",
    "render_dot",
    "render_json",
    "render_text",
    "stamp",
]

TREE_SCHEMA_ID = "mcpshim.tree/1"


def stamp(img: Image) -> str:
    """An image's time as every view shows it: UTC to the millisecond, '?' when unknown."""
    return img.time.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" if img.time else "?"


def evidence_line(img: Image) -> str:
    """One image as a finding's evidence: source, time, pids, argv and what it reached."""
    return (
        f"[{img.source}] {stamp(img)} pid {img.pid} ppid {img.ppid}: "
        f"{quote_argv(argv_of(img))} -> {os.fsdecode(img.target) or '?'}"
    )


def argv_of(img: Image) -> list[bytes]:
    """argv as a reader knows it: a shim's argv[0] is its own path, so show the command name."""
    head = img.command.encode() if img.source == "shim" else img.argv0
    return [head, *img.args]


def _image_text(img: Image) -> str:
    return (
        f"[{img.source}] {stamp(img)} {quote_argv(argv_of(img))}"
        f"  -> {escape(img.target) if img.target else '?'}"
    )


def _parent_cwd(node: Node) -> bytes | None:
    p = node.parent
    while p is not None and not p.images:
        p = p.parent
    return p.images[-1].cwd if p is not None else None


def _node_head(node: Node) -> str:
    if not node.known:
        return f"? {node.pid} (parent not in log) boot {escape(node.boot_id[:8])}"
    return f"{node.pid}"


def iter_text(forest: Forest, subject: Mapping[str, Any]) -> Iterator[str]:
    """The text view line by line, so a large forest is written without one huge string."""
    for k, v in subject.items():
        yield f"{k}: {escape(str(v))}"
    yield f"{forest.count} process(es), {forest.images} image(s), {len(forest.roots)} root(s)"
    for root in forest.roots:
        yield ""
        stack: list[tuple[Node, str, str]] = [(root, "", "")]
        while stack:
            node, lead, cont = stack.pop()
            head = _node_head(node)
            if not node.images:
                yield (lead + head)
            else:
                first, *rest = node.images
                cwd = _parent_cwd(node)
                extra = f"  cwd {escape(first.cwd)}" if first.cwd != cwd else ""
                yield (f"{lead}{head} {_image_text(first)}{extra}")
                prev = first.cwd
                for img in rest:
                    extra = f"  cwd {escape(img.cwd)}" if img.cwd != prev else ""
                    yield (f"{cont}{' ' * len(head)} exec {_image_text(img)}{extra}")
                    prev = img.cwd
            kids = node.children
            for i in range(len(kids) - 1, -1, -1):
                last = i == len(kids) - 1
                stack.append(
                    (kids[i], cont + ("└─ " if last else "├─ "), cont + ("   " if last else "│  "))
                )


def render_text(forest: Forest, subject: Mapping[str, Any]) -> str:
    return "\n".join(iter_text(forest, subject)) + "\n"


def _image_json(img: Image) -> dict[str, Any]:
    out: dict[str, Any] = {
        "source": img.source,
        "where": img.where,
        "time": stamp(img) if img.time else None,
        "command": img.command,
        "argv": [json_text(a) for a in argv_of(img)],
        "target": json_text(img.target),
        "cwd": json_text(img.cwd),
        "session": img.session or None,
        "redacted": list(img.redactions),
    }
    out.update(b64_fields({"argv": argv_of(img), "target": img.target, "cwd": img.cwd}))
    return out


def _node_json(node: Node) -> dict[str, Any]:
    return {
        "entity_id": entity_id(node.boot_id, node.pid, node.start) if node.known else None,
        "known": node.known,
        "boot_id": node.boot_id,
        "pid": node.pid,
        "start_ticks": node.start,
        "sources": list(node.sources),
        "images": [_image_json(i) for i in node.images],
        "children": [_node_json(c) for c in node.children],
    }


def render_json(forest: Forest, subject: Mapping[str, Any]) -> str:
    doc = {
        "schema": TREE_SCHEMA_ID,
        "tool": {"name": "mcpshim", "version": __version__},
        "subject": dict(subject),
        "summary": {
            "processes": forest.count,
            "images": forest.images,
            "roots": len(forest.roots),
        },
        "roots": [_node_json(r) for r in forest.roots],
    }
    return dumps(doc, indent=2) + "\n"


def _dot_esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def render_dot(forest: Forest, subject: Mapping[str, Any]) -> str:
    lines = ["digraph mcpshim {", "  rankdir=LR;", '  node [shape=box, fontname="monospace"];']
    for root in forest.roots:
        for node in root.walk():
            if node.known:
                rows = [f"pid {node.pid}"]
                for i in node.images:
                    rows += [f"[{i.source}] {quote_argv(argv_of(i))}", escape(i.target)]
                style = "dashed" if "shim" not in node.sources else "solid"
            else:
                rows, style = [f"pid {node.pid}", "(parent not in log)"], "dotted"
            label = "\\n".join(_dot_esc(r) for r in rows)
            lines.append(f'  n{node.id} [label="{label}", style={style}];')
            lines.extend(f"  n{node.id} -> n{c.id};" for c in node.children)
    lines.append("}")
    return "\n".join(lines) + "\n"


TREE_RENDERERS: dict[str, Callable[[Forest, Mapping[str, Any]], str]] = {
    "text": render_text,
    "json": render_json,
    "dot": render_dot,
}
