"""Process families from log records, keyed by (boot id, pid, start time).

A PID alone is ancestry, not identity: pids are reused. Shim records carry the child's ppid
and its own start but rarely the parent's start, so a child is linked to the *latest* process
with pid == ppid in the same boot that started no later than the child; with none, it hangs
under an "unknown" node for that ppid. Records with one identity are one process that exec'd
several images (a shim for sh, then `exec git`): one node, its images in order.

Every record source becomes an `Image` (images), and the process model (family.model) makes
each exec one image, whichever sources saw it: `images` here is the model's.
`Linker` (family.linker, re-exported here) does the linking while streaming, in memory
bounded by the pid space, so review can walk a million records. A `Forest` keeps what it
linked in columns (family.compact), whoever built it: `build_forest` from the model's images
(attribution, per session), family.forestread from a whole log's rows (`tree`); its roots
are `Node` views made from the columns, and render.text prints it from the columns.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import overload

from mcpshim.family.compact import Columns
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
    "forest_of",
    "image_of",
    "images",
    "relink_traced",
    "subtree",
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


@dataclass(eq=False)
class Forest:
    """Processes linked into trees, held in `cols`; `ids` the roots' nodes, in order."""

    cols: Columns
    ids: Sequence[int]
    count: int  # processes (known nodes)
    images: int
    #: the processes' socket calls, where the reader kept them (tree does), by identity
    net: NetFacts = field(default_factory=NetFacts)
    #: the roots as Node trees made once and kept (attribution's: it files each node), or
    #: each root's made when asked for and let go (a whole log's `tree`: one family at a time)
    keep: bool = True
    _kept: list[Node] | None = field(default=None, repr=False)

    @property
    def roots(self) -> Sequence[Node]:
        if not self.keep:
            return _Roots(self.cols, self.ids)
        if self._kept is None:
            self._kept = [subtree(self.cols, r) for r in self.ids]
        return self._kept

    def select_pid(self, pid: int) -> Forest:
        """The subtrees of the processes with this pid (a nested one is a root of its own)."""
        c = self.cols
        ids = [n for r in self.ids for n in c.walk(r) if c.pid_of(n) == pid]
        known = [m for r in ids for m in c.walk(r) if c.known[m]]
        images = sum(1 for m in known for _ in c.chain(m))
        return Forest(c, ids, len(known), images, self.net, self.keep)


class _Roots(Sequence[Node]):
    """The roots in order, each built (with its subtree) when asked for."""

    def __init__(self, cols: Columns, ids: Sequence[int]) -> None:
        self._cols, self._ids = cols, ids

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, i: int) -> Node: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Node]: ...
    def __getitem__(self, i: int | slice) -> Node | Sequence[Node]:
        if isinstance(i, slice):
            return [subtree(self._cols, r) for r in self._ids[i]]
        return subtree(self._cols, self._ids[i])

    def __iter__(self) -> Iterator[Node]:
        for r in self._ids:
            yield subtree(self._cols, r)


def _node(c: Columns, i: int, parent: Node | None) -> Node:
    imgs = [c.image(k, i) for k in c.chain(i)]
    boot, pid, start = c.ident(i)
    return Node(i, boot, pid, start, bool(c.known[i]), imgs, [], parent)


def subtree(c: Columns, root: int) -> Node:
    """The Node tree of `root` (its parent left None)."""
    top = _node(c, root, None)
    stack = [(root, top)]
    kid, sib = c.kid, c.sib
    while stack:
        i, n = stack.pop()
        ch = kid[i]
        while ch >= 0:
            child = _node(c, ch, n)
            n.children.append(child)
            stack.append((ch, child))
            ch = sib[ch]
    return top


def forest_of(cols: Columns, net: NetFacts | None = None, keep: bool = True) -> Forest:
    """The forest of built columns (`Columns.finish` lets go what only building needed)."""
    ids = cols.finish()
    return Forest(cols, ids, cols.count, cols.total, net or NetFacts(), keep)


def build_forest(imgs: Iterable[Image]) -> Forest:
    """The forest of the process model's images (family.model.entries), kept as Nodes."""
    cols = Columns()
    for img in imgs:
        cols.add_image(img)
    return forest_of(cols)


def relink_traced(
    forest: Forest, forked_by: Mapping[tuple[str, int, int | None], tuple[int, int | None]]
) -> Forest:
    """Move a process linked under a parent the log does not hold to the parent the trace
    saw fork it (`forked_by`: family.model's). A detached child whose parent exits before
    its shim reads /proc/self/stat is recorded with the subreaper as its ppid; the linker
    links at the first record, and the tracer's records of the same process, written
    later, hold the fork's real parent."""
    c = forest.cols
    known: dict[tuple[str, int], list[int]] = {}
    for root in forest.ids:
        for n in c.walk(root):
            if c.known[n]:
                known.setdefault((c.boots[c.boot[n]], c.pid_of(n)), []).append(n)
    moved = False
    for root in forest.ids:
        if c.known[root]:
            continue
        kids, ch = [], c.kid[root]
        while ch >= 0:
            kids.append(ch)
            ch = c.sib[ch]
        for node in kids:
            boot, pid, start = c.ident(node)
            traced = forked_by.get((boot, pid, start))
            if traced is None or traced[0] == c.pid_of(root):
                continue
            ppid, pstart = traced
            cands = [p for p in known.get((boot, ppid), ())
                     if pstart is None or c.value(c.start, p) == pstart]  # fmt: skip
            if len(cands) != 1 or node in _above(c, cands[0]):
                continue
            c.move(node, cands[0])
            moved = True
    if not moved:
        return forest
    ids = array("i", (r for r in forest.ids if c.known[r] or c.kid[r] >= 0))
    return Forest(c, ids, forest.count, forest.images, forest.net, forest.keep)


def _above(c: Columns, node: int) -> Iterator[int]:
    while node >= 0:
        yield node
        node = c.parent[node]
