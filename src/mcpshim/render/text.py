"""Text for a reader at a terminal: findings by family, and a pstree-like process forest.

Everything that came from a process goes through display.escape/quote_argv, so a crafted
argument cannot move the cursor or fake a line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from mcpshim.base.display import escape, quote_argv, safe
from mcpshim.family.tree import Forest, Image, Node
from mcpshim.family.view import argv_of, parent_line, stamp
from mcpshim.log.logview import cwd_text
from mcpshim.render.report import Report, sorted_findings
from mcpshim.review.findings import Severity

__all__ = ["iter_tree_text", "render_findings_text", "render_tree_text"]


def render_findings_text(report: Report) -> str:
    lines: list[str] = []
    for k, v in report.subject.items():
        lines.append(f"{k}: {escape(str(v))}")
    for note in report.notes:
        lines.append(f"note: {escape(note)}")
    if lines:
        lines.append("")
    group = None
    for f in sorted_findings(report.findings):
        if f.group != group:
            group = f.group
            lines.append(f"== {escape(group) if group else '(no family)'}")
        # Messages and evidence hold argv already quoted by display.quote_argv: escaping
        # again would double its backslashes; safe() still escapes any control character.
        lines.append(f"  [{f.level.label.upper()}] {f.rule.id} {f.rule.name}: {safe(f.text)}")
        for ev in f.evidence:
            lines.append(f"      {escape(ev.where)}: {safe(ev.text)}")
        lines.append(f"      fix: {safe(f.rule.remediation)}")
    counts = {s: sum(1 for f in report.findings if f.level == s) for s in Severity}
    summary = ", ".join(f"{n} {s.label}" for s, n in sorted(counts.items(), reverse=True) if n)
    lines.append(f"{len(report.findings)} finding(s)" + (f": {summary}" if summary else ""))
    return "\n".join(lines) + "\n"


def _image_text(img: Image) -> str:
    parent = parent_line(img)
    return (
        f"[{img.source}] {stamp(img)} {quote_argv(argv_of(img))}"
        f"  -> {escape(img.target) if img.target else '?'}"
        + (f"  started by {parent}" if parent else "")
    )


def _cwd(img: Image) -> str:
    return cwd_text(img.cwd, img.cwd_unknown)


def _parent_cwd(node: Node) -> bytes | None:
    p = node.parent
    while p is not None and not p.images:
        p = p.parent
    return p.images[-1].cwd if p is not None else None


def _node_head(node: Node) -> str:
    if not node.known:
        return f"? {node.pid} (parent not in log) boot {escape(node.boot_id[:8])}"
    return f"{node.pid}"


def iter_tree_text(forest: Forest, subject: Mapping[str, Any]) -> Iterator[str]:
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
                extra = f"  cwd {_cwd(first)}" if first.cwd != cwd or first.cwd_unknown else ""
                yield (f"{lead}{head} {_image_text(first)}{extra}")
                prev = first.cwd
                for img in rest:
                    extra = f"  cwd {_cwd(img)}" if img.cwd != prev or img.cwd_unknown else ""
                    yield (f"{cont}{' ' * len(head)} exec {_image_text(img)}{extra}")
                    prev = img.cwd
            kids = node.children
            for i in range(len(kids) - 1, -1, -1):
                last = i == len(kids) - 1
                stack.append(
                    (kids[i], cont + ("└─ " if last else "├─ "), cont + ("   " if last else "│  "))
                )


def render_tree_text(forest: Forest, subject: Mapping[str, Any]) -> str:
    return "\n".join(iter_tree_text(forest, subject)) + "\n"
