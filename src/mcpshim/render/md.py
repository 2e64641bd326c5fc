"""A relayed session as a reviewer reads it: tool calls, the processes each started, findings.

`render_md` is the markdown to paste into a code review (of what review.pipeline found),
`render_calls_text` the terminal view `tree` appends.
Process-derived text goes through display.escape/quote_argv first, then through the escape
of the target format.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcpshim import __version__
from mcpshim.base.display import escape, quote_argv, safe
from mcpshim.family.attribution import Attribution, Call
from mcpshim.family.coverage import SessionCoverage
from mcpshim.family.overlap import Overlap, calls_label
from mcpshim.family.tree import Image, Node
from mcpshim.family.view import argv_of
from mcpshim.review.findings import Finding, finding_json, worst_first

__all__ = [
    "SessionReport",
    "args_label",
    "call_status",
    "image_line",
    "may_text",
    "overlap_title",
    "render_calls_text",
    "render_md",
    "response_text",
    "server_rows",
]


@dataclass(frozen=True)
class SessionReport:
    att: Attribution
    findings: list[Finding]
    coverage: SessionCoverage | None = None


def call_status(call: Call) -> str:
    if call.response is None:
        return "no response"
    return "error" if call.is_error else "ok"


def _time(call: Call) -> str:
    return call.request.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _duration(call: Call) -> str:
    ms = call.duration_ms()
    return "-" if ms is None else f"{ms:.1f} ms"


def image_line(img: Image) -> str:
    """One image as terminal-safe text: argv quoted and escaped, target escaped."""
    target = escape(img.target) if img.target else "?"
    return f"{quote_argv(argv_of(img))}  -> {target}"


def response_text(call: Call) -> str:
    """The response's size and hash (the relay records no content): `1,234 B sha256 0a1b…`."""
    if call.response_size is None:
        return "-"
    sha = f" sha256 {call.response_sha256[:16]}…" if call.response_sha256 else ""
    return f"{call.response_size:,} B{sha}"


def args_label(call: Call) -> str:
    """ "arguments", and which credentials were redacted from them when any was."""
    return f"arguments (redacted: {', '.join(call.redacted)})" if call.redacted else "arguments"


def server_rows(init: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The server's initialize exchange as (label, text) rows; [] when none was recorded."""
    if not init:
        return []

    def pair(name: str, version: str) -> str:
        return " ".join(str(init.get(k) or "") for k in (name, version)).strip() or "?"

    rows = [
        ("server", pair("server_name", "server_version")),
        ("protocol", str(init.get("protocol_version") or "?")),
        ("client", pair("client_name", "client_version")),
        ("capabilities", json.dumps(init.get("capabilities") or {}, sort_keys=True, indent=1)),
    ]
    if init.get("instructions"):
        rows.append(("instructions", str(init["instructions"])))
    rows.append(("definition sha256", str(init.get("server_sha256") or "?")))
    if isinstance(init.get("size"), int):
        rows.append(("initialize response", f"{init['size']:,} B sha256 {init.get('sha256', '?')}"))
    if init.get("redacted"):
        rows.append(("redacted", ", ".join(str(r) for r in init["redacted"])))
    return rows


def args_text(value: Any) -> str:
    """Arguments as recorded (already redacted by the relay), escaped for a terminal."""
    return escape(json.dumps(value, ensure_ascii=False, sort_keys=True))


Section = int | Overlap  # a call's index, or a group of overlapping calls


def _owned_tree(att: Attribution, owner: Section) -> list[tuple[int, Node]]:
    """(depth, node) for the processes of a call or an overlap group, parents first."""
    out: list[tuple[int, Node]] = []
    tops = att.processes(owner) if isinstance(owner, int) else list(owner.tops)
    for top in tops:
        mine = att.owner.get(top.id)
        stack = [(0, top)]
        while stack:
            depth, node = stack.pop()
            out.append((depth, node))
            stack.extend(
                (depth + 1, c) for c in reversed(node.children) if att.owner.get(c.id) == mine
            )
    return out


def _node_note(att: Attribution, node: Node) -> str:
    notes = []
    if node.id in att.outlived:
        notes.append("outlived its call: " + att.outlived[node.id][1])
    if node.id in att.reasons and (node.parent is None or node.parent.id not in att.reasons):
        notes.append("filed by evidence: " + att.reasons[node.id])
    owner = att.owner.get(node.id)
    if isinstance(owner, tuple):
        notes.append("could be any of calls " + calls_label(owner))
    if any(i.source == "observed" for i in node.images) and "shim" not in node.sources:
        notes.append("not shimmed (observed)")
    return "; ".join(notes)


def _groups(att: Attribution) -> list[tuple[str, Section]]:
    out: list[tuple[str, Section]] = [(f"#{c.index + 1}", c.index) for c in att.calls]
    out += [("ambiguous", g) for g in att.overlaps]
    return out


def overlap_title(att: Attribution, g: Overlap) -> str:
    """A group of overlapping calls as a report heads it."""
    names: dict[str, int] = {}
    for i in g.calls:
        names[att.calls[i].name] = names.get(att.calls[i].name, 0) + 1
    tools = ", ".join(f"{n} {k}" for k, n in names.items())
    return f"calls {g.label} overlapped ({tools}): {len(g.tops)} process(es) not told apart"


def may_text(att: Attribution, call: Call) -> str:
    """What a call of an overlap group may have run, in a line ('' for any other call)."""
    return "; ".join(m.text() for m in att.may_have_run(call.index))


def render_calls_text(att: Attribution) -> str:
    lines = [f"tool calls in session {escape(att.session)}: {len(att.calls)}"]
    for tag, owner in _groups(att):
        if isinstance(owner, int):
            c = att.calls[owner]
            lines.append(
                f"{tag} {_time(c)} {escape(c.method)} {escape(c.name)} (id {escape(str(c.id))}) "
                f"{args_text(c.arguments)}  {_duration(c)} {call_status(c)}"
            )
            if may := may_text(att, c):
                lines.append(f"    may have run: {safe(may)}")
        else:
            lines.append(f"ambiguous between {escape(overlap_title(att, owner))}:")
        for depth, node in _owned_tree(att, owner):
            said = att.net.said(node)
            for k, img in enumerate(node.images):
                head = f"{node.pid}" if k == 0 else " " * len(str(node.pid)) + " exec"
                note = _node_note(att, node) if k == 0 else ""
                lines.append(
                    "    "
                    + "   " * depth
                    + ("└─ " if depth else "")
                    + f"{head} {image_line(img)}"
                    + (f"  [{escape(note)}]" if note else "")
                )
                pad = "    " + "   " * depth + " " * (len(str(node.pid)) + 4)
                lines += [f"{pad}net: {escape(t)}" for t in said.get(id(img), ())]
    return "\n".join(lines) + "\n"


# ---- markdown ----------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_\[\]#|<>])")


def md_text(text: str) -> str:
    """Terminal-escaped text made inert in markdown (no links, no HTML, no table breaks)."""
    return _MD_SPECIAL.sub(r"\\\1", escape(text))


def md_code(text: str, escaped: bool = False) -> str:
    """An inline code span that no backtick inside can close (`escaped`: already
    terminal-safe, as image_line's text is)."""
    safe = text if escaped else escape(text)
    runs = [len(m) for m in re.findall(r"`+", safe)]
    fence = "`" * (max(runs, default=0) + 1)
    body = safe.replace("|", "\\|")
    pad = " " if safe.startswith("`") or safe.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def render_md(
    rep: SessionReport,
    subject: Mapping[str, Any],
    cards: str = "",
    server: Mapping[str, Any] | None = None,
) -> str:
    """The session as Markdown; `cards`: the approval cards' Markdown, before the findings;
    `server`: its mcp-initialize record."""
    att = rep.att
    out = [f"# mcpshim session {md_text(att.session)}", ""]
    for k, v in subject.items():
        out.append(f"- **{md_text(str(k))}**: {md_text(str(v))}")
    rows = server_rows(server)
    if rows:
        out += ["", "## Server (initialize)", ""]
        out += [f"- **{md_text(k)}**: {md_code(' '.join(v.split()))}" for k, v in rows]
    out += [
        "",
        "## Tool calls",
        "",
        "| # | time (UTC) | call | arguments | duration | result | response |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in att.calls:
        red = f" (redacted: {md_text(', '.join(c.redacted))})" if c.redacted else ""
        out.append(
            f"| {c.index + 1} | {_time(c)} | {md_text(c.method)} {md_code(c.name)} "
            f"| {md_code(json.dumps(c.arguments, ensure_ascii=False, sort_keys=True))}{red} "
            f"| {_duration(c)} | {call_status(c)} | {md_text(response_text(c))} |"
        )
    for tag, owner in _groups(att):
        procs = _owned_tree(att, owner)
        may = ""
        if isinstance(owner, int):
            title = f"{tag} {md_text(att.calls[owner].label)}"
            may = may_text(att, att.calls[owner])
        else:
            title = "ambiguous: " + md_text(overlap_title(att, owner))
        out += ["", f"### {title}", ""]
        if may:
            out += [f"may have run: {md_text(may)}", ""]
        if not procs:
            out.append("(started no process of its own)" if may else "(started no process)")
        for depth, node in procs:
            note = _node_note(att, node)
            said = att.net.said(node)
            for n, img in enumerate(node.images):
                lead = "  " * depth + "- " + ("" if n == 0 else "exec ")
                tail = f" — {md_text(note)}" if note and n == 0 else ""
                out.append(f"{lead}pid {node.pid} {md_code(image_line(img), escaped=True)}{tail}")
                out += [f"{'  ' * depth}  - network: {md_text(t)}" for t in said.get(id(img), ())]
    if cards:
        out += ["", cards.rstrip("\n")]
    out += ["", f"## Findings ({len(rep.findings)})", ""]
    for f in worst_first(rep.findings):
        d = finding_json(f)
        out.append(
            f"- **{d['severity'].upper()}** {d['rule']} {d['name']} — "
            f"{md_text(d['message'])} _({md_text(d['group'])})_"
        )
        for ev in d["evidence"]:
            out.append(f"  - {md_code(ev['where'])} {md_code(safe(ev['text']), escaped=True)}")
        out.append(f"  - fix: {md_text(f.rule.remediation)}")
    out += ["", f"<sub>mcpshim {html.escape(__version__)}</sub>", ""]
    return "\n".join(out)
