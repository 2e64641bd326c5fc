"""The scan: stream the records, link each image into its family, run the rules once per
distinct invocation, and fold hits per (family, rule, key) (review.engine folds scans).

Images are linked a run at a time (`Linker.add_many`, up to `RUN` images; a record that
is not a row ends a run, so events are seen in the log's order), then settled one by one
in order: the same families, counts and evidence as linking one at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mcpshim.family.coverage import CoverageCollector
from mcpshim.family.linker import NOT_NEW, Linker
from mcpshim.family.model import Assembler
from mcpshim.family.tree import Image, image_of
from mcpshim.family.view import evidence_line, session_parents, stamp
from mcpshim.log.execlog import EventRecord, Record, Tail, session_of
from mcpshim.log.ledger import Ledger
from mcpshim.log.rows import ExecRows, Row
from mcpshim.review.findings import Evidence
from mcpshim.review.rules.execpaths import UNTRUSTED_DIR
from mcpshim.review.rules.registry import Context, Hit, run_checks
from mcpshim.review.rules.session_rules import SessionEvidence

__all__ = ["EVIDENCE_KEEP", "MEMO_CAP", "RUN", "Progress", "Scan", "family_label", "scan"]

EVIDENCE_KEEP = 3  # evidence kept per finding outside relayed sessions (memory bound)
MEMO_CAP = 65_536
RUN = 4096  # images linked in one call
Progress = Callable[[int, str], None]
#: an image waiting for its link: its row (or the model's image), identity (boot, pid, ppid, start,
#: parent start, session), memo key, the row's tail (rows' tails may be let go before
#: the run is settled, see log.rows) and its Image when made already
_Pending = tuple[
    "Row | Image",
    tuple[str, int, "int | None", "int | None", "int | None", str],
    tuple[object, ...],
    "Tail | None",
    "Image | None",
]


@dataclass
class _Acc:
    hit: Hit
    evidence: list[Evidence] = field(default_factory=list)
    count: int = 0
    keep_all: bool = False  # a relayed session's: every occurrence keeps its evidence


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


class _Folder:
    """The scan's state past linking: each family's first image, the rule memo, each
    node's hits so far, and the folded hits. `settle` takes a run of images in log order."""

    def __init__(self, ctx: Context, sess: _Sessions, exec_rows: ExecRows) -> None:
        self.ctx, self.sess, self.exec_rows = ctx, sess, exec_rows
        self.linker = Linker()
        self.heads: dict[int, tuple[Image, int | None]] = {}  # family -> first image, lost parent
        self.acc: dict[int, _Acc] = {}  # (family << 32 | hit id) -> folded hits
        self.hit_ids: dict[tuple[str, str], int] = {}  # (rule id, key) -> hit id
        self.memo: dict[tuple[object, ...], tuple[tuple[int, Hit], ...]] = {}
        self.node_hits: list[tuple[tuple[int, Hit], ...] | None] = []  # node -> first hits
        self.more_hits: dict[int, set[int]] = {}  # node -> hit ids of all its images
        self.processes = 0

    def _image(self, item: Row | Image, tail: Tail | None) -> Image:
        if isinstance(item, Image):
            return item
        img = image_of(self.exec_rows.record(item, tail))
        assert img is not None  # a shim record always has its image
        return img

    def settle(self, run: list[_Pending]) -> None:
        """Link the run's images, then fold each one's hits as the scan did one by one."""
        items, idents, keys, tails, imgs = zip(*run, strict=True)
        boots, pids, ppids, starts, pstarts, sessions = zip(*idents, strict=True)
        links = self.linker.add_many(boots, pids, ppids, starts, pstarts, sessions)
        heads, acc, hit_ids, memo = self.heads, self.acc, self.hit_ids, self.memo
        node_hits, more_hits, ctx = self.node_hits, self.more_hits, self.ctx
        roots, relayed = self.sess.roots, self.sess.relayed
        unknown = links.unknown_parent
        new_procs = 0
        for i, (node, parent, fam, memo_key) in enumerate(
            zip(links.node, links.parent, links.family, keys, strict=True)
        ):
            img: Image | None = imgs[i]
            new = parent != NOT_NEW
            if new:
                new_procs += 1
                if fam not in heads:
                    img = img or self._image(items[i], tails[i])
                    heads[fam] = (img, ppids[i] if i in unknown else None)
            hits = memo.get(memo_key)
            if hits is None:
                img = img or self._image(items[i], tails[i])
                if len(memo) >= MEMO_CAP:
                    memo.clear()
                hits = memo[memo_key] = tuple(
                    (hit_ids.setdefault((h.rule.id, h.key), len(hit_ids)), h)
                    # a shell only its child's record names (parent evidence): its exec is
                    # counted, the bypass said (MCS405), only the checks that ask read it
                    for h in (() if img.shim_hop else run_checks(ctx, img))
                )
            while len(node_hits) <= node:
                node_hits.append(None)
            if new or node_hits[node] is None:
                node_hits[node] = hits
            elif hits:
                seen = more_hits.get(node)
                if seen is None:
                    seen = more_hits[node] = {hid for hid, _ in node_hits[node] or ()}
                hits = tuple((hid, h) for hid, h in hits if hid not in seen)
                seen.update(hid for hid, _ in hits)
            if not hits:
                continue
            is_root = (boots[i], pids[i], starts[i]) in roots
            keep_all = sessions[i] in relayed
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
                    img = img or self._image(items[i], tails[i])
                    a.evidence.append(_evidence(img, hit))
        self.processes += new_procs


def _memo_key(img: Image) -> tuple[object, ...]:
    """What the checks read of an image: equal keys, equal hits."""
    if img.source == "shim":
        return ("shim", img.command, img.target, img.argv0, img.args, img.cwd, img.redactions,
                img.path)  # fmt: skip
    return (img.source, img.command, img.target, img.argv0, img.args, img.cwd, img.redactions,
            img.shim_hop, img.entry, img.attempts, img.path)  # fmt: skip


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
    ledger: Ledger | None = None,
) -> Scan:
    """The hot loop: link each image of the process model (family.model), run the checks
    once per distinct invocation, fold hits.

    One process is one occurrence: the model gives each exec once, whichever sources saw
    it, and a process's later images add no count for a hit it already has. In sessions
    relayed with --mcp every occurrence keeps its evidence, so each can be filed under the
    tool call that started it; elsewhere `EVIDENCE_KEEP` bound it."""
    sess = _Sessions(relayed)
    events: list[Record] = []
    n_records = n_images = n_in = 0  # n_in: records of the session, any kind
    exec_rows = rows if rows is not None else ExecRows()
    folder = _Folder(ctx, sess, exec_rows)
    model = Assembler(session, coverage, ledger)
    tails, epoch = exec_rows.tails, exec_rows.epoch
    tail_keys: list[tuple[object, ...] | None] = []  # a row's tail -> its memo key
    run: list[_Pending] = []

    def add(img: Image) -> None:
        nonlocal n_images
        n_images += img.entry
        ident = (img.boot_id, img.pid, img.ppid, img.start, img.parent_start, img.session)
        run.append((img, ident, _memo_key(img), None, img))

    for rec in records:
        n_records += 1
        # A row (log.rows) is a shim's exec record not even made a record: its tail's
        # fields were decoded once; it becomes an Image only when a check, a label or a
        # piece of evidence needs one (the checks are pure over the memo key's fields,
        # filesystem facts cached in ctx, and real logs repeat their commands).
        if isinstance(rec, tuple):
            if progress is not None and n_records % every == 0:
                progress(n_records, exec_rows.where(rec))
            tid = rec[2]
            tail = tails[tid]
            rsess = tail.session
            parent = bool(tail.parent_cmdline) and rec[5] is not None
            held = model.shim_exec(rsess, tail.shim, rec[3], rec[4], rec[6], parent)
            if session is not None and rsess != session:
                if held:
                    model.parent_record(exec_rows.record(rec))
                continue
            n_in += 1
            if session_ev is not None and rsess:
                session_ev.feed_exec(rsess, rec[4], rec[6], tail.shim)
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
            n_images += 1
            run.append((rec, (rec[3], rec[4], rec[5], rec[6], rec[7], rsess), tkey, tail, None))
            if held:
                for img in model.parent_record(exec_rows.record(rec, tail)):
                    add(img)
            if len(run) >= RUN:
                folder.settle(run)
                run = []
            continue
        if run:  # what follows may be an event the settling must see after these images
            folder.settle(run)
            run = []
        if progress is not None and n_records % every == 0:
            progress(n_records, rec.where)
        mine = session is None or session_of(rec) == session
        n_in += mine
        if isinstance(rec, EventRecord):
            sess.feed(rec)
            if session_ev is not None:
                session_ev.feed(rec)
            if keep_events:
                events.append(rec)
        elif mine and session_ev is not None and rec.session:
            session_ev.feed(rec)
        for img in model.feed(rec):
            add(img)
    for img in model.finish():
        add(img)
    if run:
        folder.settle(run)
    linker, acc = folder.linker, folder.acc
    by_key = {(k >> 32, a.hit.rule.id, a.hit.key): a for k, a in acc.items()}
    # Labelled at the end: a session-start naming a family's parent may come after its
    # first process (the server's first shimmed exec can beat the supervisor's record).
    labels: dict[int, str] = {}
    for fam, (head, ppid) in folder.heads.items():
        sup = sess.parents.get((head.boot_id, ppid), "") if ppid is not None else ""
        labels[fam] = family_label(head, ppid, sup)
    return Scan(
        linker, by_key, labels, n_records, n_images, folder.processes, events, n_in,
        model.coverage,
    )  # fmt: skip
