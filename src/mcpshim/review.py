"""Review: stream the log, link families, run the rules, and fold hits into findings.

Memory stays flat over the log: the linker keeps a few packed ints per live pid, and hits
are folded per (family, rule, key) with at most `EVIDENCE_CAP` records of evidence each and
a count of the rest. The exit threshold is applied by the CLI (`--fail-on`, default medium).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mcpshim.baseline import Baseline
from mcpshim.display import quote_argv
from mcpshim.execlog import Record
from mcpshim.findings import Evidence, Finding
from mcpshim.policy import Policy, apply_policy
from mcpshim.rules import Context, Hit, run_checks
from mcpshim.rules.session_rules import SessionEvidence
from mcpshim.shims import Manifest
from mcpshim.tree import Image, Linker, image_of
from mcpshim.tree_view import argv_of

__all__ = ["EVIDENCE_CAP", "ReviewResult", "family_label", "review"]

EVIDENCE_CAP = 3
Progress = Callable[[int, str], None]


@dataclass
class _Acc:
    hit: Hit
    evidence: list[Evidence] = field(default_factory=list)
    count: int = 0


@dataclass(frozen=True)
class ReviewResult:
    findings: list[Finding]
    records: int  # records read (all kinds)
    images: int  # images reviewed (after the session filter)
    processes: int
    families: int


def _ts(img: Image) -> str:
    return img.time.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" if img.time else "?"


def family_label(img: Image, unknown_ppid: int | None) -> str:
    """How findings name a family: its root process, or the missing parent it hangs under."""
    boot = img.boot_id[:8] or "?"
    sess = f"session {img.session} " if img.session else ""
    if unknown_ppid is not None:
        return f"{sess}family under pid {unknown_ppid} (parent not in log, boot {boot})"
    return f"{sess}family of pid {img.pid} {img.command} started {_ts(img)} (boot {boot})"


def _evidence(img: Image, hit: Hit) -> Evidence:
    text = (
        f"[{img.source}] {_ts(img)} pid {img.pid} ppid {img.ppid}: "
        f"{quote_argv(argv_of(img))} -> {os.fsdecode(img.target) or '?'}"
    )
    data = {
        "command": hit.data.get("command", img.command),
        "path": hit.path,
        "pid": img.pid,
        "ppid": img.ppid,
        "start_ticks": img.start,
        "boot_id": img.boot_id,
        "source": img.source,
        **{k: v for k, v in hit.data.items() if k not in ("command", "path")},
    }
    return Evidence(img.where, text, data)


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
    shim_dirs: tuple[str, ...] = ()
    if shim_dir:
        shim_dirs = tuple(dict.fromkeys([shim_dir, os.path.realpath(shim_dir)]))
    ctx = Context(policy, shim_dirs, manifest, baseline)
    session_ev = SessionEvidence(policy, manifest.shims if manifest else (), session)
    linker = Linker()
    labels: dict[int, str] = {}
    acc: dict[tuple[int, str, str], _Acc] = {}
    n_records = n_images = n_procs = 0
    for rec in records:
        n_records += 1
        if progress is not None and n_records % every == 0:
            progress(n_records, rec.where)
        session_ev.feed(rec)
        img = image_of(rec)
        if img is None or (session is not None and img.session != session):
            continue
        n_images += 1
        link = linker.add(img.boot_id, img.pid, img.ppid, img.start, img.parent_start)
        fam = linker.family(link.node)
        if link.new:
            n_procs += 1
            if fam not in labels:
                unknown = img.ppid if link.unknown_parent else None
                labels[fam] = family_label(img, unknown)
        for hit in run_checks(ctx, img):
            key = (fam, hit.rule.id, hit.key)
            a = acc.get(key)
            if a is None:
                a = acc[key] = _Acc(hit)
            a.count += 1
            if len(a.evidence) < EVIDENCE_CAP:
                a.evidence.append(_evidence(img, hit))
    if progress is not None:
        progress(n_records, "")
    # Families may have merged (a missing parent turned up): fold by the surviving family.
    merged: dict[tuple[int, str, str], _Acc] = {}
    for (fam, rid, hkey), a in acc.items():
        root = linker.family_of_family(fam)
        m = merged.get((root, rid, hkey))
        if m is None:
            merged[(root, rid, hkey)] = a
        else:
            m.count += a.count
            m.evidence.extend(a.evidence[: EVIDENCE_CAP - len(m.evidence)])
    findings = []
    for (fam, _rid, _key), a in merged.items():
        msg = a.hit.message
        if a.count > 1:
            shown = len(a.evidence)
            msg += f" ({a.count} times" + (f", first {shown} shown)" if shown < a.count else ")")
        findings.append(
            Finding(
                a.hit.rule,
                msg,
                tuple(a.evidence),
                group=labels.get(fam, f"family {fam}"),
                key=a.hit.key,
                severity=a.hit.severity,
            )
        )
    families = len({linker.family_of_family(f) for f in labels})
    findings += session_ev.findings()
    return ReviewResult(apply_policy(findings, policy), n_records, n_images, n_procs, families)
