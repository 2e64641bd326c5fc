"""Review: stream the log, link families, run the rules, and fold hits into findings.

Memory stays flat over the log: the linker keeps a few packed ints per live pid, and hits
are folded per (family, rule, key) with a count and their evidence: all of it in sessions
relayed with --mcp (each occurrence is filed under its tool call), at most
`EVIDENCE_KEEP` records elsewhere (the scan itself is review.scan's, re-exported here).
The exit threshold is applied by the CLI (`--fail-on`, default medium).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from mcpshim.base import fdio
from mcpshim.errors import InputError
from mcpshim.family.attribution import Collector, log_has_relayed_sessions
from mcpshim.family.coverage import CoverageCollector, SessionCoverage
from mcpshim.log import execlog
from mcpshim.log.execlog import EventRecord, LogProblem, Record
from mcpshim.log.indexscan import MARKED
from mcpshim.log.rows import ExecRows
from mcpshim.log.scope import scope as session_scope
from mcpshim.paths import Locations
from mcpshim.review.baseline import Baseline
from mcpshim.review.findings import Finding
from mcpshim.review.policy import Policy, apply_policy
from mcpshim.review.rules.coverage_rules import bypass_findings
from mcpshim.review.rules.file_rules import configured_said_once
from mcpshim.review.rules.registry import Context
from mcpshim.review.rules.session_rules import SessionEvidence
from mcpshim.review.scan import (
    EVIDENCE_KEEP,
    MEMO_CAP,
    Progress,
    Scan,
    _Acc,
    family_label,
    scan,
)
from mcpshim.shim import registry
from mcpshim.shim.manifest import Manifest

__all__ = [
    "EVIDENCE_KEEP",
    "MEMO_CAP",
    "Progress",
    "ReviewResult",
    "Scan",
    "coverage_of",
    "family_label",
    "fold",
    "make_context",
    "relayed_sessions",
    "review",
    "review_log",
    "scan",
]


@dataclass(frozen=True)
class ReviewResult:
    findings: list[Finding]
    records: int  # records read (all kinds)
    images: int  # images reviewed (after the session filter)
    processes: int
    families: int
    in_session: int = 0  # records of the session reviewed (of any kind); all without one
    coverage: tuple[SessionCoverage, ...] = ()  # each `mcpshim run` session reviewed


def make_context(
    policy: Policy,
    shim_dir: str | None = None,
    manifest: Manifest | None = None,
    baseline: Baseline | None = None,
) -> Context:
    """With a shim dir (the commands' case), every other shim directory mcpshim installed
    counts too: its records are recognised by their own manifest (shim.registry)."""
    shim_dirs: tuple[str, ...] = ()
    others: dict[str, Manifest] = {}
    if shim_dir:
        for d, m in registry.installed().items():
            if os.path.realpath(d) != os.path.realpath(shim_dir):
                others[d] = others[os.path.realpath(d)] = m
        dirs = [shim_dir, os.path.realpath(shim_dir), *others]
        shim_dirs = tuple(dict.fromkeys(dirs))
        if manifest is not None:
            others = {shim_dir: manifest, os.path.realpath(shim_dir): manifest, **others}
    return Context(policy, shim_dirs, manifest, baseline, manifests=others)


def coverage_of(one: Scan, ctx: Context) -> tuple[SessionCoverage, ...]:
    """Each run session's coverage, from the scan's collector."""
    if one.coverage is None:
        return ()
    return tuple(one.coverage.results(ctx.shim_names(), ctx.shim_dirs))


def fold(
    one: Scan,
    policy: Policy,
    extra: Iterable[Finding] = (),
    coverage: tuple[SessionCoverage, ...] = (),
) -> ReviewResult:
    """Fold a scan's hits per family, apply the policy; `coverage`'s bypasses become
    findings too (MCS405)."""
    linker, labels = one.linker, one.labels
    # Families may have merged (a missing parent turned up): fold by the surviving family.
    merged: dict[tuple[int, str, str], _Acc] = {}
    for (fam, rid, hkey), a in one.acc.items():
        k = (linker.family_of_family(fam), rid, hkey)
        m = merged.get(k)
        if m is None:
            merged[k] = a
        else:
            m.count += a.count
            m.keep_all = m.keep_all or a.keep_all
            room = None if m.keep_all else max(EVIDENCE_KEEP - len(m.evidence), 0)
            m.evidence.extend(a.evidence if room is None else a.evidence[:room])
    findings = []
    for (fam, _rid, _key), a in merged.items():
        findings.append(
            Finding(
                a.hit.rule,
                a.hit.message,
                tuple(a.evidence),
                group=labels.get(fam, f"family {fam}"),
                key=a.hit.key,
                severity=a.hit.severity,
                count=a.count,
            )
        )
    families = len({linker.family_of_family(f) for f in labels})
    findings += configured_said_once(findings, extra)  # (MCS107 once per process)
    findings += bypass_findings(coverage, policy)
    return ReviewResult(
        apply_policy(findings, policy),
        one.records,
        one.images,
        one.processes,
        families,
        one.in_session,
        coverage,
    )


def review(
    records: Iterable[Record],
    *,
    policy: Policy,
    session: str | None = None,
    shim_dir: str | None = None,
    manifest: Manifest | None = None,
    baseline: Baseline | None = None,
    progress: Progress | None = None,
    every: int = 50_000,
) -> ReviewResult:
    ctx = make_context(policy, shim_dir, manifest, baseline)
    session_ev = SessionEvidence(policy, ctx.shim_names(), session)
    cov = CoverageCollector(session)
    result = scan(records, ctx, session, progress, every, session_ev=session_ev, coverage=cov)
    if progress is not None:
        progress(result.records, "")
    return fold(result, policy, session_ev.findings(), coverage_of(result, ctx))


def relayed_sessions(loc: Locations) -> set[str]:
    """The ids of every session run with --mcp, by a byte scan (no decoding)."""
    found: set[str] = set()
    if not loc.log_dir.is_dir() or not log_has_relayed_sessions(loc):
        return found
    tail = b""
    for seg in execlog.segments(loc):
        try:
            with fdio.open_regular(seg) as fh:  # a FIFO would block the read
                while chunk := fh.read(1 << 22):
                    buf = tail + chunk
                    for kind, sid in MARKED.findall(buf):
                        if kind == b"mcp-session":
                            found.add(sid.decode("utf-8", "replace"))
                    tail = buf[-256:]
        except (OSError, InputError):
            continue
    return found


def _lean(items: Iterable[Any]) -> Iterator[Any]:
    """The records as review keeps them: a listing (`mcp-tools`) with only what its
    readers take of each tool, its name and description (family.attribution). A session
    keeps its records, and a listing of 100,000 tools with its schemas took 150 MiB."""
    for item in items:
        if isinstance(item, EventRecord) and item.kind == "mcp-tools":
            tools = item.data.get("tools")
            lean = [
                {"name": t.get("name"), "definition": {"description": _description(t)}}
                for t in (tools if isinstance(tools, list) else [])
                if isinstance(t, dict)
            ]
            yield EventRecord(item.kind, {**item.data, "tools": lean}, item.where)
        else:
            yield item


def _description(tool: dict[str, Any]) -> Any:
    d = tool.get("definition")
    return d.get("description") if isinstance(d, dict) else None


def review_log(
    loc: Locations,
    problems: list[LogProblem],
    *,
    policy: Policy,
    session: str | None = None,
    shim_dir: str | None = None,
    manifest: Manifest | None = None,
    baseline: Baseline | None = None,
    progress: Progress | None = None,
    collector: Collector | None = None,
) -> ReviewResult:
    """Review every segment of the log at `loc` in one pass over its rows (log.rows), or
    one session's part of it (log.scope), teed through `collector` when given."""
    ctx = make_context(policy, shim_dir, manifest, baseline)
    session_ev = SessionEvidence(policy, ctx.shim_names(), session)
    if not loc.log_dir.is_dir():
        raise InputError(f"no exec log at {loc.log_dir} (run `mcpshim install` first)")
    rows = ExecRows(execlog.Anchors(loc.boot_dir), max_tails=MEMO_CAP)  # tails bounded
    sc = session_scope(loc, session)
    if sc is not None:
        items, relayed = sc.rows(rows, problems), {sc.session} if sc.relayed else set()
    else:
        items, relayed = rows.iter_log(loc, problems), relayed_sessions(loc)
    if collector is not None:
        items = collector.tee_rows(_lean(items), rows)
    one = scan(items, ctx, session, progress, session_ev=session_ev, relayed=relayed,
               coverage=CoverageCollector(session), rows=rows)  # fmt: skip
    if progress is not None:
        progress(one.records, "")
    return fold(one, policy, session_ev.findings(), coverage_of(one, ctx))
