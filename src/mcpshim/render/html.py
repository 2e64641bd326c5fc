"""A relayed session as one self-contained HTML page: timeline, family tree, findings.

No script, no external asset, no URL: a Content-Security-Policy of default-src 'none' makes
the browser refuse any load, so the page can be mailed or attached and opened offline.
Every process-derived string is terminal-escaped (display.escape) and then HTML-escaped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from html import escape as _html
from typing import Any

from mcpshim import __version__
from mcpshim.base.display import escape, safe
from mcpshim.family.attribution import Attribution, Call
from mcpshim.family.overlap import calls_label
from mcpshim.family.tree import Node
from mcpshim.render.md import (
    SessionReport,
    _groups,
    _node_note,
    _owned_tree,
    args_label,
    call_status,
    image_line,
    may_text,
    overlap_title,
    response_text,
    server_rows,
)
from mcpshim.review.findings import Severity, finding_json, worst_first

__all__ = ["render_html"]

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header,section,footer{max-width:1200px;margin:0 auto;padding:12px 24px}
header{background:#1d2330;color:#fff;max-width:none}header h1{margin:0 0 6px;font-size:22px}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0}
dl.meta dt{color:#aab3c5}dl.meta dd{margin:0;font-family:ui-monospace,monospace}
h2{border-bottom:2px solid #d5d9e2;padding-bottom:4px}
code,pre,.argv{font-family:ui-monospace,Menlo,monospace;font-size:12.5px}
pre{white-space:pre-wrap;word-break:break-all;margin:4px 0;background:#eef0f4;padding:6px}
.call{background:#fff;border:1px solid #d5d9e2;border-radius:6px;margin:10px 0;padding:8px 12px}
.call.amb{border-color:#c98a00;background:#fffaf0}
.track{position:relative;height:10px;background:#eef0f4;border-radius:3px;margin:6px 0}
.bar{position:absolute;top:0;height:10px;min-width:3px;background:#3b6fd8;border-radius:3px}
.bar.error{background:#c0392b}
.tool{font-weight:700}.muted{color:#6b7386}
.ok{color:#1e7d32}.error{color:#c0392b}
ul.procs,ul.tree{list-style:none;padding-left:18px;margin:4px 0}
ul.procs li,ul.tree li{margin:2px 0}
.pid{display:inline-block;min-width:56px;color:#6b7386}
.src{font-size:11px;padding:0 4px;border-radius:3px;background:#e3e7ef}
.src.observed{background:#fde9c8}
.tag{font-size:11px;padding:0 5px;border-radius:3px;background:#dce8ff;margin-left:6px}
.tag.amb{background:#ffe3b3}.tag.late{background:#f8d0cc}
.finding{background:#fff;border-left:5px solid #999;margin:10px 0;padding:6px 12px}
.sev-high{border-color:#c0392b}.sev-medium{border-color:#e67e22}
.sev-low{border-color:#3b6fd8}.sev-info{border-color:#8a93a6}
.sev{font-weight:700;text-transform:uppercase;font-size:12px}
.evidence{margin:4px 0 4px 12px;padding:0;list-style:square}
dl.card{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:4px 0}
dl.card dt{color:#6b7386}dl.card dd{margin:0}
"""


def h(text: str | bytes) -> str:
    """Terminal-escaped, then HTML-escaped: inert in the page and when copied out of it."""
    return _html(escape(text), quote=True)


def hlines(text: str) -> str:
    """h() per line, for a <pre>: its newlines stay newlines (h() would show them as \\n)."""
    return "\n".join(h(line) for line in text.split("\n"))


def hq(text: str) -> str:
    """Like h() for text that already holds quoted argv (finding messages and evidence): its
    backslashes stay single, control characters are still escaped."""
    return _html(safe(text), quote=True)


def _ts(t: datetime | None) -> str:
    return t.strftime("%H:%M:%S.%f")[:-3] + "Z" if t else "?"


def _span(att: Attribution) -> tuple[float, float]:
    times = [c.request.timestamp() for c in att.calls]
    times += [c.response.timestamp() for c in att.calls if c.response]
    if not times:
        return 0.0, 1.0
    lo, hi = min(times), max(times)
    return lo, max(hi, lo + 1e-3)


def _bar(att: Attribution, call: Call) -> str:
    lo, hi = _span(att)
    start = call.request.timestamp()
    end = call.response.timestamp() if call.response else hi
    left = 100 * (start - lo) / (hi - lo)
    width = max(0.3, 100 * (end - start) / (hi - lo))
    cls = "bar error" if call.is_error else "bar"
    return (
        f'<div class="track"><div class="{cls}" style="left:{left:.2f}%;'
        f'width:{min(width, 100 - left):.2f}%"></div></div>'
    )


def _may(att: Attribution, call: Call) -> str:
    may = may_text(att, call)
    return f'<p class="amb">may have run: {hq(may)}</p>' if may else ""


def _proc_items(att: Attribution, owner: Any) -> str:
    rows = _owned_tree(att, owner)
    if not rows:
        mine = isinstance(owner, int) and att.may_have_run(owner)
        return f'<p class="muted">started no process{" of its own" if mine else ""}</p>'
    out = ['<ul class="procs">']
    for depth, node in rows:
        out.append(f'<li style="margin-left:{depth * 18}px">{_node_html(att, node, depth)}</li>')
    out.append("</ul>")
    return "".join(out)


def _node_html(att: Attribution, node: Node, depth: int = 0) -> str:
    parts = []
    said = att.net.said(node)
    for k, img in enumerate(node.images):
        lead = ("└─ " if depth and k == 0 else "") + ("" if k == 0 else "exec ")
        parts.append(
            f'{lead}<span class="pid">{node.pid}</span><span class="src {h(img.source)}">'
            f'{h(img.source)}</span> <span class="argv">{_html(image_line(img))}</span>'
        )
        parts += [f'<span class="muted">network: {h(t)}</span>' for t in said.get(id(img), ())]
    note = _node_note(att, node)
    if note:
        parts[0] += f' <span class="tag late">{h(note)}</span>'
    return "<br>".join(parts)


def _timeline(att: Attribution) -> str:
    out = ['<section id="timeline"><h2>Tool calls and the processes they started</h2>']
    if not att.calls:
        out.append('<p class="muted">No tool call was relayed in this session.</p>')
    for tag, owner in _groups(att):
        if isinstance(owner, int):
            c = att.calls[owner]
            status = call_status(c)
            args = json.dumps(c.arguments, ensure_ascii=False, sort_keys=True, indent=1)
            ms = c.duration_ms()
            out.append(
                f'<div class="call" id="call-{c.index + 1}"><div>{tag} '
                f'<span class="muted">{h(c.method)}</span> <span class="tool">{h(c.name)}</span> '
                f'<span class="muted">id {h(str(c.id))} · {_ts(c.request)} → '
                f"{_ts(c.response)}{f' · {ms:.1f} ms' if ms is not None else ''}</span> "
                f'<span class="{"error" if c.is_error else "ok"}">{h(status)}</span> '
                f'<span class="muted">response {h(response_text(c))}</span></div>'
                f"{_bar(att, c)}<details><summary>{h(args_label(c))}</summary>"
                f"<pre>{hlines(args)}</pre></details>{_may(att, c)}{_proc_items(att, owner)}</div>"
            )
        else:
            out.append(
                f'<div class="call amb"><div><b>Ambiguous</b>: {h(overlap_title(att, owner))} '
                f"(not guessed)</div>{_proc_items(att, owner)}</div>"
            )
    out.append("</section>")
    return "".join(out)


def _server(init: Mapping[str, Any] | None) -> str:
    rows = server_rows(init)
    if not rows:
        return ""
    dl = "".join(
        f"<dt>{h(k)}</dt><dd>{f'<pre>{hlines(v)}</pre>' if chr(10) in v else h(v)}</dd>"
        for k, v in rows
    )
    return f'<section id="server"><h2>Server (initialize)</h2><dl class="card">{dl}</dl></section>'


def _tag(att: Attribution, node: Node) -> str:
    owner = att.owner.get(node.id)
    if isinstance(owner, int):
        return f'<span class="tag">#{owner + 1} {h(att.calls[owner].name)}</span>'
    if isinstance(owner, tuple):
        return f'<span class="tag amb">ambiguous: calls {h(calls_label(owner))}</span>'
    return ""


def _tree(att: Attribution) -> str:
    out = ['<section id="tree"><h2>Process family</h2>']
    for root in att.forest.roots:
        out.append('<ul class="tree">')
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            node, depth = stack.pop()
            pad = f' style="margin-left:{depth * 18}px"'
            if not node.known:
                label = "server (not recorded)" if node is att.server else "parent not in log"
                out.append(
                    f'<li{pad}><span class="pid">{node.pid}</span> '
                    f'<span class="muted">{label}</span></li>'
                )
            else:
                extra = ' <span class="tag">MCP server</span>' if node is att.server else ""
                out.append(f"<li{pad}>{_node_html(att, node)}{extra}{_tag(att, node)}</li>")
            stack.extend((c, depth + 1) for c in reversed(node.children))
        out.append("</ul>")
    out.append("</section>")
    return "".join(out)


def _findings(rep: SessionReport) -> str:
    out = [f'<section id="findings"><h2>Findings ({len(rep.findings)})</h2>']
    if not rep.findings:
        out.append('<p class="muted">No findings.</p>')
    for f in worst_first(rep.findings):
        d = finding_json(f)
        ev = "".join(
            f"<li><code>{h(e['where'])}</code> <span class='argv'>{hq(e['text'])}</span></li>"
            for e in d["evidence"]
        )
        out.append(
            f'<div class="finding sev-{d["severity"]}" data-rule="{h(d["rule"])}">'
            f'<span class="sev">{d["severity"]}</span> <b>{h(d["rule"])}</b> {h(d["name"])} — '
            f'{hq(d["message"])}<div class="muted">{h(d["group"])}</div>'
            f'<ul class="evidence">{ev}</ul><div class="muted">fix: {h(f.rule.remediation)}</div>'
            "</div>"
        )
    out.append("</section>")
    return "".join(out)


def render_html(
    rep: SessionReport,
    subject: Mapping[str, Any],
    cards: str = "",
    server: Mapping[str, Any] | None = None,
) -> str:
    """The page; `cards`: the approval cards' section (render.cards), after the timeline;
    `server`: the session's mcp-initialize record."""
    att = rep.att
    counts = {s: sum(1 for f in rep.findings if f.level == s) for s in Severity}
    meta = dict(subject)
    meta["tool calls"] = len(att.calls)
    meta["processes"] = att.forest.count
    meta["findings"] = ", ".join(f"{n} {s.label}" for s, n in counts.items() if n) or "none"
    dl = "".join(f"<dt>{h(str(k))}</dt><dd>{h(str(v))}</dd>" for k, v in meta.items())
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>mcpshim report: session {h(att.session)}</title><style>{_CSS}</style></head>"
        f'<body><header><h1>mcpshim session report</h1><dl class="meta">{dl}</dl></header>'
        f"{_server(server)}{_timeline(att)}{cards}{_tree(att)}{_findings(rep)}"
        f'<footer class="muted">mcpshim {h(__version__)} · generated {made} · '
        "self-contained: no scripts, no external resources</footer></body></html>\n"
    )
