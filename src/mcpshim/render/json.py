"""Versioned JSON envelopes for scripts: findings (mcpshim.findings/1) and process forests
(mcpshim.tree/1). Exact bytes of non-UTF-8 fields go in `*_b64` siblings (see logview).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcpshim import __version__
from mcpshim.base.display import b64_fields, dumps, json_text
from mcpshim.family.netfacts import NetFacts, exec_of, fact_json
from mcpshim.family.tree import Forest, Image, Node
from mcpshim.family.view import argv_of, stamp
from mcpshim.log.logview import entity_id
from mcpshim.render.report import Report, sorted_findings
from mcpshim.review.findings import Severity, finding_json

__all__ = ["JSON_SCHEMA_ID", "TREE_SCHEMA_ID", "render_findings_json", "render_tree_json"]


JSON_SCHEMA_ID = "mcpshim.findings/1"


def render_findings_json(report: Report) -> str:
    counts = {s.label: sum(1 for f in report.findings if f.level == s) for s in Severity}
    doc: dict[str, Any] = {
        "schema": JSON_SCHEMA_ID,
        "tool": {"name": "mcpshim", "version": __version__},
        "command": report.command,
        "subject": dict(report.subject),
        "notes": list(report.notes),
        "summary": {"total": len(report.findings), "by_severity": counts},
    }
    if report.coverage is not None:  # review: each `mcpshim run` session's (family.coverage)
        doc["coverage"] = [c.as_json() for c in report.coverage]
    doc["findings"] = [finding_json(f) for f in sorted_findings(report.findings)]
    if report.calls:
        doc["calls"] = [v.to_json() for v in report.calls]
    return dumps(doc, indent=2) + "\n"


TREE_SCHEMA_ID = "mcpshim.tree/1"


def _image_json(img: Image) -> dict[str, Any]:
    out: dict[str, Any] = {
        "source": img.source,
        "where": img.where,
        "time": stamp(img) if img.time else None,
        "command": img.command,
        "argv": [json_text(a) for a in argv_of(img)],
        "target": json_text(img.target),
        "cwd": json_text(img.cwd) if not img.cwd_unknown else None,
        "session": img.session or None,
        "redacted": list(img.redactions),
        "parent_cmdline": json_text(img.parent_cmdline) if img.parent_cmdline else None,
    }
    if img.parent_argv:
        out["parent_argv"] = [json_text(a) for a in img.parent_argv]
    if img.cwd_unknown:
        out["cwd_unknown"] = img.cwd_unknown
    out.update(b64_fields({"argv": argv_of(img), "target": img.target, "cwd": img.cwd}))
    out.update(b64_fields({"parent_cmdline": img.parent_cmdline, "parent_argv": img.parent_argv}))
    return out


def _node_json(node: Node, net: NetFacts) -> dict[str, Any]:
    facts = net.by_ident.get((node.boot_id, node.pid, node.start), ()) if node.known else ()
    return {
        "entity_id": entity_id(node.boot_id, node.pid, node.start) if node.known else None,
        "known": node.known,
        "boot_id": node.boot_id,
        "pid": node.pid,
        "start_ticks": node.start,
        "sources": list(node.sources),
        "images": [_image_json(i) for i in node.images],
        # its socket calls as review's calls give them (family.netfacts), the exec named
        "net": [fact_json(n, exec_of(n, node.images)) for n in facts],
        "children": [_node_json(c, net) for c in node.children],
    }


def render_tree_json(forest: Forest, subject: Mapping[str, Any]) -> str:
    doc = {
        "schema": TREE_SCHEMA_ID,
        "tool": {"name": "mcpshim", "version": __version__},
        "subject": dict(subject),
        "summary": {
            "processes": forest.count,
            "images": forest.images,
            "roots": len(forest.roots),
        },
        "roots": [_node_json(r, forest.net) for r in forest.roots],
    }
    return dumps(doc, indent=2) + "\n"
