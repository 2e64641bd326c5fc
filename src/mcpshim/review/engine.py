"""Review: stream the log, link families, run the rules, and fold hits into findings.

Memory stays flat over the log: the linker keeps a few packed ints per live pid, and hits
are folded per (family, rule, key) with a count and their evidence: all of it in sessions
relayed with --mcp (each occurrence is filed under its tool call), at most
`EVIDENCE_KEEP` records elsewhere (the scan itself is review.scan's, re-exported here).
The exit threshold is applied by the CLI (`--fail-on`, default medium).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from mcpshim.family.coverage import CoverageCollector, SessionCoverage
from mcpshim.log.execlog import Record
from mcpshim.review.baseline import Baseline
from mcpshim.review.findings import Finding
from mcpshim.review.policy import Policy, apply_policy
from mcpshim.review.rules.coverage_rules import bypass_findings
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
    "review",
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


def coverage_of(scans: list[Scan], ctx: Context) -> tuple[SessionCoverage, ...]:
    """Each run session's coverage, from the collectors of consecutive scans joined."""
    collectors = [s.coverage for s in scans if s.coverage is not None]
    if not collectors:
        return ()
    first = collectors[0]
    for later in collectors[1:]:
        first.absorb(later)
    return tuple(first.results(ctx.shim_names(), ctx.shim_dirs))


def fold(
    scans: list[Scan],
    policy: Policy,
    extra: Iterable[Finding] = (),
    coverage: tuple[SessionCoverage, ...] = (),
) -> ReviewResult:
    """Join scans of consecutive runs of the log, fold hits per family, apply the policy;
    `coverage`'s bypasses become findings too (MCS405)."""
    first = scans[0]
    linker, labels = first.linker, dict(first.labels)
    parts = [(0, first.acc)]
    for later in scans[1:]:
        off = linker.absorb(later.linker)
        labels.update({f + off: text for f, text in later.labels.items()})
        parts.append((off, later.acc))
    # Families may have merged (a missing parent turned up): fold by the surviving family.
    merged: dict[tuple[int, str, str], _Acc] = {}
    for off, acc in parts:
        for (fam, rid, hkey), a in acc.items():
            k = (linker.family_of_family(fam + off), rid, hkey)
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
    findings += extra
    findings += bypass_findings(coverage, policy)
    return ReviewResult(
        apply_policy(findings, policy),
        sum(s.records for s in scans),
        sum(s.images for s in scans),
        sum(s.processes for s in scans),
        families,
        sum(s.in_session for s in scans),
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
    return fold([result], policy, session_ev.findings(), coverage_of([result], ctx))
