"""Process families from log records, keyed by (boot id, pid, start time).

A PID alone is ancestry, not identity: pids are reused. Shim records carry the child's ppid
and its own start but rarely the parent's start, so a child is linked to the *latest* process
with pid == ppid in the same boot that started no later than the child; with none, it hangs
under an "unknown" node for that ppid. Records with one identity are one process that exec'd
several images (a shim for sh, then `exec git`): one node, its images in order.

Every record source becomes an `Image` (images, which re-exports here).
`Linker` does the linking while streaming, in memory bounded by the pid space, so review can
walk a million records; `build_forest` keeps the nodes for the views in `render.text`.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from mcpshim.base.frozen import positional
from mcpshim.family import trace_merge as _trace_merge  # trace images: registered in SOURCES
from mcpshim.family.images import SOURCES, Image, image_of, images

__all__ = [
    "SOURCES",
    "Forest",
    "Image",
    "Linker",
    "Node",
    "build_forest",
    "image_of",
    "images",
]

_RECENT = 4  # processes remembered per (boot, pid): pid reuse needs only the latest few
del _trace_merge


# ---- linking -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Link:
    node: int
    new: bool  # the first image of this process
    parent: int | None  # the parent node (maybe an unknown node) when new
    unknown_parent: bool  # parent is an "unknown" node created for this ppid
    adopted: int | None  # an unknown node this new node turned out to be (merged into it)


_make_link = positional(Link)  # a Link per record: without the frozen __init__'s setattrs


class Linker:
    """Streaming identity and family assignment.

    Remembers the latest few processes per (boot, pid) as packed ints ((start+1) << 32 | node),
    and per node its family (union-find, so adopting an unknown parent merges families).
    """

    def __init__(self) -> None:
        self._procs: dict[str, dict[int, list[int]]] = {}
        # (boot, ppid, session) -> [node, min child start]
        self._unknown: dict[tuple[str, int, int], list[int]] = {}
        self._node_fam = array("q")
        self._node_sess = array("l")  # index into _sessions
        self._sessions: dict[str, int] = {"": 0}
        self._fam_parent = array("q")
        self.unknown_pid: dict[int, int] = {}  # unknown node -> the ppid it stands for

    @property
    def nodes(self) -> int:
        return len(self._node_fam)

    def family(self, node: int) -> int:
        return self.family_of_family(self._node_fam[node])

    def family_of_family(self, fam: int) -> int:
        """The family a (possibly merged) family id now belongs to."""
        parent = self._fam_parent
        while parent[fam] != fam:
            parent[fam] = parent[parent[fam]]
            fam = parent[fam]
        return fam

    def _new_node(self, fam: int | None, sess: int = 0) -> int:
        if fam is None:
            fam = len(self._fam_parent)
            self._fam_parent.append(fam)
        self._node_fam.append(fam)
        self._node_sess.append(sess)
        return len(self._node_fam) - 1

    def _find_parent(
        self, boot: str, ppid: int, start: int | None, pstart: int | None, sess: int
    ) -> int:
        by_pid = self._procs.get(boot)
        slots = by_pid.get(ppid) if by_pid is not None else None
        return self._find_in(slots, start, pstart, sess) if slots else -1

    def _find_in(self, slots: list[int], start: int | None, pstart: int | None, sess: int) -> int:
        """_find_parent among the ppid's remembered processes."""
        best, best_start = -1, -2
        for packed in slots:
            s = (packed >> 32) - 1
            # A session id is inherited: a process of another session is not the parent.
            other = self._node_sess[packed & 0xFFFFFFFF]
            if sess and other and other != sess:
                continue
            if pstart is not None:
                if s == pstart:
                    return packed & 0xFFFFFFFF
                continue
            if (start is None or s < 0 or s <= start) and s >= best_start:
                best, best_start = packed & 0xFFFFFFFF, s
        return best

    def add(
        self,
        boot: str,
        pid: int,
        ppid: int | None,
        start: int | None,
        pstart: int | None,
        session: str = "",
    ) -> Link:
        sess = 0
        if session:
            sess = self._sessions.get(session, -1)
            if sess < 0:
                sess = self._sessions[session] = len(self._sessions)
        by_pid = self._procs.get(boot)
        if by_pid is None:
            by_pid = self._procs[boot] = {}
        slots = by_pid.get(pid)
        tag = (start + 1) if start is not None and start >= 0 else 0
        if slots:
            for packed in slots:
                if packed >> 32 == tag:
                    return _make_link(packed & 0xFFFFFFFF, False, None, False, None)
        parent = unknown = None
        if ppid is not None and ppid != pid:
            pslots = by_pid.get(ppid)
            found = self._find_in(pslots, start, pstart, sess) if pslots else -1
            if found >= 0:
                parent = found
            else:
                u = self._unknown.get((boot, ppid, sess))
                if u is None:
                    u = [self._new_node(None), start if start is not None else -1]
                    self._unknown[(boot, ppid, sess)] = u
                    self.unknown_pid[u[0]] = ppid
                elif start is not None and (u[1] < 0 or start < u[1]):
                    u[1] = start
                parent, unknown = u[0], True
        fam = None
        if parent is not None:
            fam = self._node_fam[parent]
            if self._fam_parent[fam] != fam:
                fam = self.family_of_family(fam)
        node = self._new_node(fam, sess)
        adopted = None
        u = self._unknown.get((boot, pid, sess))
        if u is not None and start is not None and u[1] >= start:
            # The parent that was missing turns up: its children started after it did.
            del self._unknown[(boot, pid, sess)]
            ufam, mine = self.family(u[0]), self.family(node)
            if ufam != mine:
                self._fam_parent[ufam] = mine
            adopted = u[0]
        packed = (tag << 32) | node
        if slots is None:
            by_pid[pid] = [packed]
        else:
            slots.append(packed)
            if len(slots) > _RECENT:
                del slots[0]
        return _make_link(node, True, parent, bool(unknown), adopted)

    def absorb(self, later: Linker) -> int:
        """Append the state of a linker that read the records right after ours.

        Its unknown parents are looked up among our processes (the parent was in our part
        of the log); its processes become the latest of their pids. Returns the offset
        added to its family ids. (An unknown parent of ours that turns up in its part is
        not adopted: the window for that is the few records around the split.)
        """
        node_off, fam_off = len(self._node_fam), len(self._fam_parent)
        sess_map = array("l", [0] * len(later._sessions))
        for name, idx in later._sessions.items():
            sess_map[idx] = self._sessions.setdefault(name, len(self._sessions)) if name else 0
        self._node_fam.extend(f + fam_off for f in later._node_fam)
        self._node_sess.extend(sess_map[x] for x in later._node_sess)
        self._fam_parent.extend(p + fam_off for p in later._fam_parent)
        for unode, ppid in later.unknown_pid.items():
            self.unknown_pid[unode + node_off] = ppid
        for (boot, ppid, lsess), (unode, first) in later._unknown.items():
            sess = sess_map[lsess]
            mine = self.family(unode + node_off)
            found = self._find_parent(boot, ppid, first if first >= 0 else None, None, sess)
            if found < 0:
                u = self._unknown.get((boot, ppid, sess))
                if u is None:
                    self._unknown[(boot, ppid, sess)] = [unode + node_off, first]
                    continue
                found = u[0]
            theirs = self.family(found)
            if theirs != mine:
                self._fam_parent[mine] = theirs
        for boot, by_pid in later._procs.items():
            ours = self._procs.setdefault(boot, {})
            for pid, slots in by_pid.items():
                moved = [((p >> 32) << 32) | ((p & 0xFFFFFFFF) + node_off) for p in slots]
                ours[pid] = (ours.get(pid, []) + moved)[-_RECENT:]
        return fam_off


# ---- the forest --------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class Node:
    id: int
    boot_id: str
    pid: int  # for an unknown node: the ppid it stands for
    start: int | None
    known: bool
    images: list[Image] = field(default_factory=list)
    children: list[Node] = field(default_factory=list)
    parent: Node | None = None

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(i.source for i in self.images))

    @property
    def first_time(self) -> datetime | None:
        return next((i.time for i in self.images if i.time is not None), None)

    def walk(self) -> Iterator[Node]:
        stack: list[Node] = [self]
        while stack:
            n = stack.pop()
            yield n
            stack.extend(reversed(n.children))


@dataclass
class Forest:
    roots: Sequence[Node]  # a list, or family.compact's roots built on access
    count: int  # processes (known nodes)
    images: int

    def select_pid(self, pid: int) -> Forest:
        roots = [n for r in self.roots for n in r.walk() if n.pid == pid]
        known = [m for r in roots for m in r.walk() if m.known]
        return Forest(roots, len(known), sum(len(m.images) for m in known))


class _Pool:
    """Shares equal values between images: logs repeat their cwds, targets and argvs."""

    def __init__(self) -> None:
        self._d: dict[object, object] = {}

    def __call__(self, img: Image) -> Image:
        d = self._d
        return Image(
            img.source,
            img.where,
            img.time,
            d.setdefault(img.boot_id, img.boot_id),  # type: ignore[arg-type]
            img.pid,
            img.ppid,
            img.start,
            img.parent_start,
            d.setdefault(img.cwd, img.cwd),  # type: ignore[arg-type]
            d.setdefault(img.command, img.command),  # type: ignore[arg-type]
            d.setdefault(img.target, img.target),  # type: ignore[arg-type]
            d.setdefault(img.argv0, img.argv0),  # type: ignore[arg-type]
            d.setdefault(img.args, img.args),  # type: ignore[arg-type]
            d.setdefault(img.session, img.session),  # type: ignore[arg-type]
            img.redactions,
            img.uid,
            img.cwd_unknown,
            img.parent_cmdline,
            d.setdefault(img.path, img.path),  # type: ignore[arg-type]
            img.shim_hop,
        )


def _merged(images: list[Image], img: Image) -> bool:
    """A shim's exec is traced too (its script, then its target): one node shows it once, as
    the shim's image (see family.trace_merge). True when `img` is already shown."""
    if img.source == "trace-shim":
        return any(i.source == "shim" and i.pid == img.pid for i in images)
    if img.source == "shim":
        images[:] = [i for i in images if not (i.source == "trace-shim" and i.pid == img.pid)]
    return False


def build_forest(imgs: Iterable[Image]) -> Forest:
    linker = Linker()
    nodes: list[Node] = []
    count = 0
    total = 0
    pool = _Pool()
    for raw in imgs:
        img = pool(raw)
        link = linker.add(img.boot_id, img.pid, img.ppid, img.start, img.parent_start, img.session)
        total += 1
        if not link.new:
            if not _merged(nodes[link.node].images, img):
                nodes[link.node].images.append(img)
            continue
        if link.unknown_parent and link.parent == len(nodes):
            assert link.parent is not None
            nodes.append(
                Node(link.parent, img.boot_id, linker.unknown_pid[link.parent], None, False)
            )
        node = Node(link.node, img.boot_id, img.pid, img.start, True, [img])
        nodes.append(node)
        count += 1
        if link.parent is not None:
            node.parent = nodes[link.parent]
            node.parent.children.append(node)
        if link.adopted is not None:
            orphanage = nodes[link.adopted]
            for child in orphanage.children:
                child.parent = node
            node.children.extend(orphanage.children)
            orphanage.children = []
    roots = [n for n in nodes if n.parent is None and (n.known or n.children)]
    return Forest(roots, count, total)
