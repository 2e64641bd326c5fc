"""Text for a reader at a terminal: findings by family, and a pstree-like process forest.

Everything that came from a process goes through display.escape/quote_argv, so a crafted
argument cannot move the cursor or fake a line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from mcpshim.base.display import escape, quote_argv, safe
from mcpshim.family.compact import CompactRoots
from mcpshim.family.compact_text import compact_lines, net_lines
from mcpshim.family.tree import Forest, Image, Node
from mcpshim.family.view import argv_of, fork_words, parent_line, stamp
from mcpshim.log.logview import cwd_text
from mcpshim.render.report import Report, coverage_lines, sorted_findings
from mcpshim.review.findings import Finding, Severity, finding_json
from mcpshim.review.verdicts import CallVerdict

__all__ = ["iter_tree_text", "render_findings_text", "render_tree_text", "write_tree_text"]


def _call_block(v: CallVerdict) -> list[str]:
    """The article's questions for one call, each answered in a line."""
    status = {True: "error", False: "ok", None: "no answer"}[v.is_error]
    lines = [f"   answered: {status}"]
    if v.ran:
        ran = "; ".join(v.ran)
    elif v.may_have_run:  # never "nothing": it may have run what overlapping calls did
        ran = "not known which (it overlapped other calls)"
    else:
        ran = "nothing"
    lines.append(f"   ran: {safe(ran)}")
    lines += [f"   filed by evidence: {safe(why)}" for why in v.filed_by_evidence]
    if v.may_have_run:
        lines.append(f"   may have run: {safe('; '.join(v.may_have_run))}")
    if v.where:
        lines.append(f"   from: {escape(', '.join(v.where))}")
    maybe = dict(v.maybe)
    for key, question, yes in v.answers:
        if yes:
            answer = "YES: " + " | ".join(yes)
        elif key in maybe:
            answer = "maybe (if it ran one of them): " + " | ".join(maybe[key])
        else:
            answer = "no"
        lines.append(f"   {question}: {safe(answer)}")
    return lines


def _finding_lines(f: Finding, limit: int | None) -> list[str]:
    # Messages and evidence hold argv already quoted by display.quote_argv: escaping
    # again would double its backslashes; safe() still escapes any control character.
    d = _head(f)
    lines = [
        f"  [{d['severity'].upper()}] {d['rule']} {d['name']} ({d['confidence']}): "
        f"{safe(d['message'])}"
    ]
    shown = f.evidence if limit is None else f.evidence[:limit]
    for ev in shown:
        lines.append(f"      {escape(ev.where)}: {safe(ev.text)}")
    rest = len(f.evidence) - len(shown)
    if rest:
        lines.append(f"      ... {rest} more (--evidence all)")
    elif f.evidence and f.count > len(f.evidence):  # none kept: nothing was left out
        lines.append(f"      ... {f.count - len(f.evidence)} more occurrence(s) not kept")
    lines.append(f"      fix: {safe(f.rule.remediation)}")
    return lines


def _head(f: Finding) -> dict[str, Any]:
    return finding_json(f, evidence=False)


def _routine(infos: list[Finding]) -> list[str]:
    """Info findings of a group in one line: routine events are counted, not listed."""
    if not infos:
        return []
    parts = [f"{d['rule']} {d['message']}" for d in map(_head, infos)]
    return [f"  routine (info): {safe('; '.join(parts))}"]


def render_findings_text(report: Report) -> str:
    lines: list[str] = []
    for k, v in report.subject.items():
        lines.append(f"{k}: {escape(str(v))}")
    for label, text in coverage_lines(report.coverage or ()):
        lines.append(f"{label}: {escape(text)}")
    for note in report.notes:
        lines.append(f"note: {escape(note)}")
    if lines:
        lines.append("")
    by_group: dict[str, list[Finding]] = {}
    for f in sorted_findings(report.findings):
        by_group.setdefault(f.group, []).append(f)
    verdicts = {v.group: v for v in report.calls}
    for group in sorted(set(by_group) | set(verdicts)):
        found = by_group.get(group, [])
        lines.append(f"== {escape(group) if group else '(no family)'}")
        if group in verdicts:
            lines += _call_block(verdicts[group])
        infos = [f for f in found if f.level == Severity.INFO]
        for f in found:
            if f.level != Severity.INFO:
                lines += _finding_lines(f, report.evidence)
        lines += _routine(infos)
    counts = {s: sum(1 for f in report.findings if f.level == s) for s in Severity}
    summary = ", ".join(f"{n} {s.label}" for s, n in sorted(counts.items(), reverse=True) if n)
    lines.append(f"{len(report.findings)} finding(s)" + (f": {summary}" if summary else ""))
    return "\n".join(lines) + "\n"


#: an image's text after its time stamp, by what it is made of: a log repeats its command
#: lines, and quoting one costs more than the rest of its line (bounded, cleared when full)
_REST: dict[tuple[object, ...], str] = {}


def _image_text(img: Image) -> str:
    key = (img.source, img.command, img.argv0, img.args, img.target, img.parent_cmdline,
           img.attempts)  # fmt: skip
    rest = _REST.get(key)
    if rest is None:
        if len(_REST) >= 1 << 16:
            _REST.clear()
        parent = parent_line(img)
        tried = ", ".join(f"{escape(p)} ({escape(e)})" for p, e in img.attempts)
        if img.source == "trace-fork":
            rest = _REST[key] = f"({fork_words(img)})"
            return f"[{img.source}] {stamp(img)} {rest}"
        rest = _REST[key] = (
            f"{quote_argv(argv_of(img))}  -> {escape(img.target) if img.target else '?'}"
            + (f"  started by {parent}" if parent else "")
            + (f"  tried {tried}" if tried else "")
        )
    return f"[{img.source}] {stamp(img)} {rest}"


def _mark(mark: Callable[[str], str] | None, img: Image) -> str:
    word = mark(img.where) if mark is not None else ""
    return f"  [{word}]" if word else ""


def _cwd(img: Image) -> str:
    return cwd_text(img.cwd, img.cwd_unknown)


def _parent_cwd(node: Node) -> bytes | None:
    p = node.parent
    while p is not None and not p.images:
        p = p.parent
    return p.current.cwd if p is not None else None


def _node_head(node: Node, supervisors: Mapping[tuple[str, int], str]) -> str:
    if not node.known:
        known = supervisors.get((node.boot_id, node.pid))
        if known is not None:
            return f"{node.pid} {safe(known)}"
        return f"? {node.pid} (parent not in log) boot {escape(node.boot_id[:8])}"
    return f"{node.pid}"


def iter_tree_text(
    forest: Forest,
    subject: Mapping[str, Any],
    supervisors: Mapping[tuple[str, int], str] | None = None,
    mark: Callable[[str], str] | None = None,
) -> Iterator[str]:
    """The text view line by line, so a large forest is written without one huge string.
    `supervisors`: (boot id, pid) -> what a process missing from the log is, from the
    sessions' start records (family.view.session_parents). `mark(where)`: a word to show
    after an image (a record no verified seal covers)."""
    supervisors = supervisors or {}
    yield from _tree_header(forest, subject)
    if isinstance(forest.roots, CompactRoots):  # printed from its columns, the same lines
        yield from compact_lines(forest.roots, supervisors, mark, _image_text, forest.net)
        return
    net = forest.net
    for root in forest.roots:
        yield ""
        stack: list[tuple[Node, str, str]] = [(root, "", "")]
        while stack:
            node, lead, cont = stack.pop()
            head = _node_head(node, supervisors)
            if not node.images:
                yield (lead + head)
            else:
                first, *rest = node.images
                said = net.said_at((node.boot_id, node.pid, node.start), node.images)
                pad = f"{cont}{' ' * len(head)} "
                cwd = _parent_cwd(node)
                extra = f"  cwd {_cwd(first)}" if first.cwd != cwd or first.cwd_unknown else ""
                yield (f"{lead}{head} {_image_text(first)}{extra}{_mark(mark, first)}")
                yield from net_lines(pad, said.get(0, ()))
                prev = first.cwd
                for i, img in enumerate(rest, 1):
                    extra = f"  cwd {_cwd(img)}" if img.cwd != prev or img.cwd_unknown else ""
                    yield f"{pad}exec {_image_text(img)}{extra}{_mark(mark, img)}"
                    yield from net_lines(pad, said.get(i, ()))
                    prev = img.cwd
            kids = node.children
            for i in range(len(kids) - 1, -1, -1):
                last = i == len(kids) - 1
                stack.append(
                    (kids[i], cont + ("└─ " if last else "├─ "), cont + ("   " if last else "│  "))
                )


def _tree_header(forest: Forest, subject: Mapping[str, Any]) -> Iterator[str]:
    for k, v in subject.items():
        yield f"{k}: {escape(str(v))}"
    yield f"{forest.count} process(es), {forest.images} image(s), {len(forest.roots)} root(s)"


def render_tree_text(
    forest: Forest,
    subject: Mapping[str, Any],
    supervisors: Mapping[tuple[str, int], str] | None = None,
) -> str:
    return "\n".join(iter_tree_text(forest, subject, supervisors)) + "\n"


_BATCH = 4096


def write_tree_text(
    forest: Forest,
    subject: Mapping[str, Any],
    emit: Callable[[str], None],
    supervisors: Mapping[tuple[str, int], str] | None = None,
    mark: Callable[[str], str] | None = None,
) -> None:
    """iter_tree_text's lines, each followed by a newline, handed to `emit` in batches
    (a large forest never becomes one string)."""
    _emit_lines(iter_tree_text(forest, subject, supervisors, mark), emit)


def _emit_lines(lines: Iterable[str], emit: Callable[[str], object]) -> None:
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= _BATCH:
            batch.append("")
            emit("\n".join(batch))
            batch.clear()
    if batch:
        batch.append("")
        emit("\n".join(batch))
