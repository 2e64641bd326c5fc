"""Process families from log records, keyed by (boot id, pid, start time).

A PID alone is ancestry, not identity: pids are reused. Shim records carry the child's ppid
and its own start but rarely the parent's start, so a child is linked to the *latest* process
with pid == ppid in the same boot that started no later than the child; with none, it hangs
under an "unknown" node for that ppid. Records with one identity are one process that exec'd
several images (a shim for sh, then `exec git`): one node, its images in order.

Every record source becomes an `Image` (images), and the process model (family.model) makes
each exec one image, whichever sources saw it: `images` here is the model's.
`Linker` (family.linker, re-exported here) does the linking while streaming, in memory
bounded by the pid space, so review can walk a million records; `build_forest` keeps the
nodes for the views in `render.text`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from mcpshim.family.images import Image, image_of
from mcpshim.family.linker import Link, Linker
from mcpshim.family.model import entries as images
from mcpshim.family.netfacts import NetFacts

__all__ = [
    "Forest",
    "Image",
    "Link",
    "Linker",
    "Node",
    "build_forest",
    "image_of",
    "images",
    "relink_traced",
]


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
    def current(self) -> Image:
        """What the process runs last: its last exec, not a PATH search's failed step or a
        failed exec recorded after it (a trace is often read after the shim's record)."""
        return next((i for i in reversed(self.images) if i.entry), self.images[-1])

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
    #: the processes' socket calls, where the reader kept them (tree does), by identity
    net: NetFacts = field(default_factory=NetFacts)

    def select_pid(self, pid: int) -> Forest:
        roots = [n for r in self.roots for n in r.walk() if n.pid == pid]
        known = [m for r in roots for m in r.walk() if m.known]
        return Forest(roots, len(known), sum(len(m.images) for m in known), self.net)


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
            img.entry,
            img.attempts,
            img.parent_argv,
        )


def build_forest(imgs: Iterable[Image]) -> Forest:
    linker = Linker()
    nodes: list[Node] = []
    count = 0
    total = 0
    pool = _Pool()
    for raw in imgs:
        img = pool(raw)
        link = linker.add(img.boot_id, img.pid, img.ppid, img.start, img.parent_start, img.session)
        total += img.entry
        if not link.new:
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


def relink_traced(
    forest: Forest, forked_by: Mapping[tuple[str, int, int | None], tuple[int, int | None]]
) -> Forest:
    """Move a process linked under a parent the log does not hold to the parent the trace
    saw fork it (`forked_by`: family.model's). A detached child whose parent exits before
    its shim reads /proc/self/stat is recorded with the subreaper as its ppid; the linker
    links at the first record, and the tracer's records of the same process, written
    later, hold the fork's real parent."""
    known: dict[tuple[str, int], list[Node]] = {}
    for root in forest.roots:
        for n in root.walk():
            if n.known:
                known.setdefault((n.boot_id, n.pid), []).append(n)
    moved = False
    for root in list(forest.roots):
        if root.known:
            continue
        for node in list(root.children):
            traced = forked_by.get((node.boot_id, node.pid, node.start))
            if traced is None or traced[0] == root.pid:
                continue
            ppid, pstart = traced
            cands = [p for p in known.get((node.boot_id, ppid), ())
                     if pstart is None or p.start == pstart]  # fmt: skip
            if len(cands) != 1 or any(a is node for a in _above(cands[0])):
                continue
            root.children.remove(node)
            node.parent = cands[0]
            cands[0].children.append(node)
            moved = True
    if not moved:
        return forest
    roots = [r for r in forest.roots if r.known or r.children]
    return Forest(roots, forest.count, forest.images, forest.net)


def _above(node: Node) -> Iterator[Node]:
    p: Node | None = node
    while p is not None:
        yield p
        p = p.parent
