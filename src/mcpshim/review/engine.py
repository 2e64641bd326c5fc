"""Review: stream the log, link families, run the rules, and fold hits into findings.

Memory stays flat over the log: the linker keeps a few packed ints per live pid, and hits
are folded per (family, rule, key) with a count and their evidence: all of it in sessions
relayed with --mcp (each occurrence is filed under its tool call), at most
`EVIDENCE_KEEP` records elsewhere. The exit threshold is applied by the CLI (`--fail-on`,
default medium).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mcpshim.family.coverage import CoverageCollector, SessionCoverage
from mcpshim.family.tree import Image, Linker, image_of
from mcpshim.family.view import evidence_line, session_parents, stamp
from mcpshim.log.execlog import EventRecord, ExecRecord, Record, session_of
from mcpshim.log.rows import ExecRows, Row
from mcpshim.review.baseline import Baseline
from mcpshim.review.findings import Evidence, Finding
from mcpshim.review.policy import Policy, apply_policy
from mcpshim.review.rules.coverage_rules import bypass_findings
from mcpshim.review.rules.execpaths import UNTRUSTED_DIR
from mcpshim.review.rules.registry import Context, Hit, run_checks
from mcpshim.review.rules.session_rules import SessionEvidence
from mcpshim.shim import registry
from mcpshim.shim.manifest import Manifest

__all__ = [
    "EVIDENCE_KEEP",
    "ReviewResult",
    "Scan",
    "coverage_of",
    "family_label",
    "fold",
    "make_context",
    "review",
    "scan",
]

EVIDENCE_KEEP = 3  # evidence kept per finding outside relayed sessions (memory bound)
MEMO_CAP = 65_536
Progress = Callable[[int, str], None]


@dataclass
class _Acc:
    hit: Hit
    evidence: list[Evidence] = field(default_factory=list)
    count: int = 0
    keep_all: bool = False  # a relayed session's: every occurrence keeps its evidence


@dataclass(frozen=True)
class ReviewResult:
    findings: list[Finding]
    records: int  # records read (all kinds)
    images: int  # images reviewed (after the session filter)
    processes: int
    families: int
    in_session: int = 0  # records of the session reviewed (of any kind); all without one
    coverage: tuple[SessionCoverage, ...] = ()  # each `mcpshim run` session reviewed


def family_label(img: Image, unknown_ppid: int | None, supervisor: str = "") -> str:
    """How findings name a family: its root process, or the missing parent it hangs under
    (the `mcpshim run` supervisor or the session's command, when that is who it is)."""
    boot = img.boot_id[:8] or "?"
    sess = f"session {img.session} " if img.session else ""
    if unknown_ppid is not None:
        if supervisor:
            return f"{sess}family of pid {unknown_ppid} {supervisor} (boot {boot})"
        return f"{sess}family under pid {unknown_ppid} (parent not in log, boot {boot})"
    return f"{sess}family of pid {img.pid} {img.command} started {stamp(img)} (boot {boot})"


def _evidence(img: Image, hit: Hit) -> Evidence:
    text = evidence_line(img)
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
    if img.parent_cmdline:
        data["parent_cmdline"] = img.parent_cmdline.decode("utf-8", "replace")
    return Evidence(img.where, text, data)


@dataclass
class Scan:
    """What one pass over a run of records found, before families are folded."""

    linker: Linker
    acc: dict[tuple[int, str, str], _Acc]  # (family, rule id, key)
    labels: dict[int, str]
    records: int = 0
    images: int = 0
    processes: int = 0
    events: list[Record] = field(default_factory=list)  # kept for the session rules
    in_session: int = 0
    coverage: CoverageCollector | None = None


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


class _Sessions:
    """What session events tell the scan about the processes that follow: which sessions
    were relayed with --mcp (their findings are filed under tool calls, so every
    occurrence keeps its evidence), which process is a session's own command (the
    server, started by `mcpshim run`), and which pid is its supervisor."""

    def __init__(self, relayed: Iterable[str]) -> None:
        self.relayed = set(relayed)
        self.roots: set[tuple[str, int, int | None]] = set()
        self.parents: dict[tuple[str, int], str] = {}  # (boot, pid) -> what it is

    def feed(self, rec: EventRecord) -> None:
        d = rec.data
        sid = d.get("session")
        if not isinstance(sid, str):
            return
        if rec.kind == "mcp-session":
            self.relayed.add(sid)
        elif rec.kind == "session-start":
            boot = str(d.get("boot_id") or "")
            if isinstance(d.get("child_pid"), int):
                self.roots.add((boot, d["child_pid"], d.get("child_start")))
            self.parents.update(session_parents(d))


def scan(
    records: Iterable[Row | Record],
    ctx: Context,
    session: str | None = None,
    progress: Progress | None = None,
    every: int = 50_000,
    keep_events: bool = False,
    session_ev: SessionEvidence | None = None,
    relayed: Iterable[str] = (),
    coverage: CoverageCollector | None = None,
    rows: ExecRows | None = None,
) -> Scan:
    """The hot loop: link each image, run the checks once per distinct invocation, fold hits.

    One process is one occurrence: the images that repeat an exec another source already
    recorded (the tracer's half of a shim's exec, a sampled image of a traced process) add
    no count, and the shim's own hop under --trace (the exec of the shim script) is no
    finding. In sessions relayed with --mcp every occurrence keeps its evidence, so each
    can be filed under the tool call that started it; elsewhere `EVIDENCE_KEEP` bound it."""
    linker = Linker()
    labels: dict[int, str] = {}
    heads: dict[int, tuple[Image, int | None]] = {}  # family -> its first image, lost parent
    acc: dict[int, _Acc] = {}  # (family << 32 | hit id) -> folded hits
    hit_ids: dict[tuple[str, str], int] = {}  # (rule id, key) -> hit id
    memo: dict[tuple[object, ...], tuple[tuple[int, Hit], ...]] = {}
    node_hits: list[tuple[tuple[int, Hit], ...] | None] = []  # node -> its first image's hits
    more_hits: dict[int, set[int]] = {}  # node -> hit ids of all its images (when several)
    sess = _Sessions(relayed)
    events: list[Record] = []
    n_records = n_images = n_procs = n_in = 0  # n_in: records of the session, any kind
    exec_rows = rows if rows is not None else ExecRows()
    tails, epoch = exec_rows.tails, exec_rows.epoch
    tail_keys: list[tuple[object, ...] | None] = []  # a row's tail -> its memo key

    def image(item: Row | Record) -> Image | None:
        return image_of(exec_rows.record(item) if isinstance(item, tuple) else item)

    for rec in records:
        n_records += 1
        # An exec record becomes an Image only when a check, a label or a piece of evidence
        # needs one; the checks are pure over the memo key's fields (filesystem facts are
        # cached in ctx) and real logs repeat their commands. A row (log.rows) is an exec
        # record not even made a record: its tail's fields were decoded once.
        img: Image | None = None
        if isinstance(rec, tuple):
            if progress is not None and n_records % every == 0:
                progress(n_records, exec_rows.where(rec))
            tid = rec[2]
            tail = tails[tid]
            rsess = tail.session
            if coverage is not None and coverage.feed_exec(
                rsess,
                tail.shim,
                rec[3],
                rec[4],
                rec[6],
                bool(tail.parent_cmdline) and rec[5] is not None,
            ):
                coverage.parent_record(exec_rows.record(rec))
            if session is not None and rsess != session:
                continue
            n_in += 1
            if session_ev is not None and rsess:
                session_ev.feed_exec(rsess, rec[4], rec[6], tail.shim)
            ident = (rec[3], rec[4], rec[5], rec[6], rec[7], rsess)
            if epoch != exec_rows.epoch:
                tail_keys.clear()
                epoch = exec_rows.epoch
            while len(tail_keys) <= tid:
                tail_keys.append(None)
            tkey = tail_keys[tid]
            if tkey is None:
                tkey = tail_keys[tid] = (
                    "shim",
                    tail.shim,
                    tail.target,
                    tail.invoked_as,
                    tail.args,
                    tail.cwd,
                    tail.redactions,
                    tail.path,
                )
            memo_key: tuple[object, ...] = tkey
        elif isinstance(rec, ExecRecord):
            if progress is not None and n_records % every == 0:
                progress(n_records, rec.where)
            if coverage is not None:
                coverage.feed(rec)
            if session is not None and rec.session != session:
                continue
            n_in += 1
            if session_ev is not None and rec.session:
                session_ev.feed(rec)
            ident = (rec.boot_id, rec.pid, rec.ppid, rec.start, rec.parent_start, rec.session)
            memo_key = (
                "shim",
                rec.shim,
                rec.target,
                rec.invoked_as,
                rec.args,
                rec.cwd,
                rec.redactions,
                rec.path,
            )
            rsess = rec.session
        else:
            if progress is not None and n_records % every == 0:
                progress(n_records, rec.where)
            if coverage is not None:
                coverage.feed(rec)
            if session is None or session_of(rec) == session:
                n_in += 1
            sess.feed(rec)
            if session_ev is not None:
                session_ev.feed(rec)
            if keep_events:
                events.append(rec)
            img = image_of(rec)
            if img is None or (session is not None and img.session != session):
                continue
            ident = (img.boot_id, img.pid, img.ppid, img.start, img.parent_start, img.session)
            memo_key = (
                img.source,
                img.command,
                img.target,
                img.argv0,
                img.args,
                img.cwd,
                img.redactions,
                img.shim_hop,
            )
            rsess = img.session
        n_images += 1
        link = linker.add(ident[0], ident[1], ident[2], ident[3], ident[4], ident[5])
        fam = linker.family(link.node)
        if link.new:
            n_procs += 1
            if fam not in heads:
                img = img or image(rec)
                assert img is not None
                heads[fam] = (img, ident[2] if link.unknown_parent else None)
        hits = memo.get(memo_key)
        if hits is None:
            img = img or image(rec)
            assert img is not None
            if len(memo) >= MEMO_CAP:
                memo.clear()
            hits = memo[memo_key] = tuple(
                (hit_ids.setdefault((h.rule.id, h.key), len(hit_ids)), h)
                for h in (() if img.shim_hop else run_checks(ctx, img))
            )
        node = link.node
        while len(node_hits) <= node:
            node_hits.append(None)
        if link.new or node_hits[node] is None:
            node_hits[node] = hits
        elif hits:
            seen = more_hits.get(node)
            if seen is None:
                seen = more_hits[node] = {hid for hid, _ in node_hits[node] or ()}
            hits = tuple((hid, h) for hid, h in hits if hid not in seen)
            seen.update(hid for hid, _ in hits)
        if not hits:
            continue
        is_root = (ident[0], ident[1], ident[3]) in sess.roots
        keep_all = rsess in sess.relayed
        for hid, hit in hits:
            if is_root and hit.rule is UNTRUSTED_DIR:
                continue  # the session's own command: the client config chose it
            key = (fam << 32) | hid
            a = acc.get(key)
            if a is None:
                a = acc[key] = _Acc(hit)
            a.keep_all = a.keep_all or keep_all
            a.count += 1
            if keep_all or len(a.evidence) < EVIDENCE_KEEP:
                img = img or image(rec)
                assert img is not None
                a.evidence.append(_evidence(img, hit))
    by_key = {(k >> 32, a.hit.rule.id, a.hit.key): a for k, a in acc.items()}
    # Labelled at the end: a session-start naming a family's parent may come after its
    # first process (the server's first shimmed exec can beat the supervisor's record).
    for fam, (head, ppid) in heads.items():
        sup = sess.parents.get((head.boot_id, ppid), "") if ppid is not None else ""
        labels[fam] = family_label(head, ppid, sup)
    return Scan(linker, by_key, labels, n_records, n_images, n_procs, events, n_in, coverage)


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
