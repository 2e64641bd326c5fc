"""The page `report --all -o DIR` writes next to the sessions' own pages: every relayed
session with its findings, on one self-contained page.

It links to nothing (no <a>, and the same Content-Security-Policy as a session page): each
session's page is named as text, to open by hand, so the page stays inert wherever it is
mailed or attached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from mcpshim import __version__
from mcpshim.render.html import _CSS, h, hq
from mcpshim.review.findings import Finding, Severity, finding_json, worst_first

__all__ = ["IndexRow", "render_index_html"]


@dataclass(frozen=True)
class IndexRow:
    session: str
    name: str
    started: str
    command: str
    tool_calls: int
    page: str  # the file name of its page in the same directory
    findings: Sequence[Finding]


def _counts(found: Sequence[Finding]) -> str:
    counts = {s: sum(1 for f in found if f.level == s) for s in reversed(Severity)}
    return ", ".join(f"{n} {s.label}" for s, n in counts.items() if n) or "no findings"


def _row(r: IndexRow) -> str:
    items = "".join(
        f'<li class="finding sev-{d["severity"]}"><span class="sev">{d["severity"]}</span> '
        f"<b>{h(d['rule'])}</b> {h(d['name'])} — {hq(d['message'])}</li>"
        for d in (finding_json(f, evidence=False) for f in worst_first(r.findings))
    )
    return (
        f'<div class="call"><div><span class="tool">{h(r.session)}</span> '
        f'<span class="muted">{h(r.name)}</span></div>'
        f'<dl class="card"><dt>started</dt><dd>{h(r.started)}</dd>'
        f"<dt>command</dt><dd><code>{h(r.command)}</code></dd>"
        f"<dt>tool calls</dt><dd>{r.tool_calls}</dd>"
        f"<dt>findings</dt><dd>{h(_counts(r.findings))}</dd>"
        f"<dt>page</dt><dd><code>{h(r.page)}</code></dd></dl>"
        f'<ul class="evidence">{items}</ul></div>'
    )


def render_index_html(rows: Sequence[IndexRow], subject: Mapping[str, Any]) -> str:
    worst = max((f.level for r in rows for f in r.findings), default=None)
    meta = {**subject, "sessions": len(rows), "highest": worst.label if worst else "none"}
    dl = "".join(f"<dt>{h(str(k))}</dt><dd>{h(str(v))}</dd>" for k, v in meta.items())
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    body = "".join(_row(r) for r in rows) or '<p class="muted">No relayed session.</p>'
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>mcpshim sessions</title><style>{_CSS}</style></head>"
        f'<body><header><h1>mcpshim sessions</h1><dl class="meta">{dl}</dl></header>'
        f'<section id="sessions"><h2>Sessions ({len(rows)}), newest first</h2>{body}</section>'
        f'<footer class="muted">mcpshim {h(__version__)} · generated {made} · '
        "self-contained: no scripts, no links, no external resources</footer></body></html>\n"
    )
