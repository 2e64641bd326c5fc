"""The one forest model: processes and their images in columns (family.tree.Forest holds it).

A `Node` and an `Image` object per record cost about 700 bytes each, 700 MB for a million.
Here a process is a row of integer arrays (its parent, its first child and next sibling, its
first and last image) and a shim's image read as a row (family.forestread) is a row too: its
time as a float, its integers, its place in the log as (segment, offset), and an index into
a table of the values images share (cwd, command, argv, target, session, PATH...), which a
log repeats. Images given as objects (the process model's, per session, and the sources
other than shims) stay `Image` objects. Linking is `family.linker.Linker`'s, one image at a
time (`add_image`) or a run of rows at a time (forestread.add_rows), both placed by `link`,
so a forest is the same whichever way its images came; family.tree makes `Node` views of
it, render.text prints it straight from the columns.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence

from mcpshim.base.frozen import positional
from mcpshim.family.images import Image
from mcpshim.family.linker import NOT_NEW, Linker
from mcpshim.log.execlog import Tail, _utc

__all__ = ["Columns"]

_NONE = -(1 << 63)  # None in an int column
_WIDE = _NONE + 1  # a value wider than int64 (a pid may have 19 digits): in Columns.wide
_MAX = (1 << 63) - 1
_make_image = positional(Image)
#: -1 for the link columns of nodes to come; they run ahead of `pid`, whose length counts
_UNSET = array("i", [-1]) * 4096


class Columns:
    """Nodes and images as arrays; indices are the Linker's node ids."""

    def __init__(self) -> None:
        self.linker = Linker()
        self.count = self.total = 0
        i, q = "i", "q"
        # nodes
        self.boot, self.pid, self.start = array(i), array(q), array(q)
        self.known = array("b")
        self.parent, self.kid, self.kid_last, self.sib = array(i), array(i), array(i), array(i)
        self.img, self.img_last = array(i), array(i)
        # images: the next image of the same node, and a shim row (>= 0) or -1 - an
        # index into `others`
        self.i_next, self.i_ref = array(i), array(i)
        self.others: list[Image] = []
        # shim rows
        self.r_seg, self.r_off, self.r_time = array(i), array(q), array("d")
        self.r_ppid, self.r_start, self.r_pstart, self.r_static = (
            array(q),
            array(q),
            array(q),
            array(i),
        )
        self.statics: list[Tail] = []
        self._static_ids: dict[Tail, int] = {}
        self.boots: list[str] = []
        self._boot_ids: dict[str, int] = {}
        self.segs: list[str] = []
        self._seg_ids: dict[str, int] = {}
        self.wheres: dict[int, str] = {}  # rows whose place is not "segment@offset"
        self.wide: dict[tuple[int, int], int] = {}  # (id of the column, row) -> value

    def _put(self, col: array[int], v: int | None) -> None:
        if v is None:
            col.append(_NONE)
        elif _WIDE < v <= _MAX:
            col.append(v)
        else:
            self.wide[(id(col), len(col))] = v
            col.append(_WIDE)

    def pid_of(self, node: int) -> int:
        pid = self.value(self.pid, node)
        assert pid is not None  # a node's pid (an unknown node's: the ppid it stands for)
        return pid

    def value(self, col: array[int], i: int) -> int | None:
        v = col[i]
        if v == _NONE:
            return None
        return self.wide[(id(col), i)] if v == _WIDE else v

    # ---- building --------------------------------------------------------------------

    def _new_node(self, boot: str, pid: int, start: int | None, known: bool) -> int:
        b = self._boot_ids.get(boot)
        if b is None:
            b = self._boot_ids[boot] = len(self.boots)
            self.boots.append(boot)
        self.boot.append(b)
        if _WIDE < pid <= _MAX:
            self.pid.append(pid)
        else:
            self._put(self.pid, pid)
        if start is not None and _WIDE < start <= _MAX:
            self.start.append(start)
        else:
            self._put(self.start, start)
        self.known.append(known)
        return len(self.pid) - 1

    def _static(self, tail: Tail) -> int:
        sid = self._static_ids.get(tail)
        if sid is None:
            sid = self._static_ids[tail] = len(self.statics)
            self.statics.append(tail)
        return sid

    def _seg(self, seg: str) -> int:
        s = self._seg_ids.get(seg)
        if s is None:
            s = self._seg_ids[seg] = len(self.segs)
            self.segs.append(seg)
        return s

    def chain(self, node: int) -> Iterator[int]:
        """The node's images, in order (their indices)."""
        k = self.img[node]
        while k >= 0:
            yield k
            k = self.i_next[k]

    def add_image(self, img: Image) -> None:
        """One image of the process model (family.model), kept as the object it is."""
        ref = -1 - len(self.others)
        self.others.append(img)
        self.link((img.boot_id,), (img.pid,), (img.ppid,), (img.start,), (img.parent_start,),
                  (img.session,), (ref,), img.entry)  # fmt: skip

    def link(
        self,
        boots: Sequence[str],
        pids: Sequence[int],
        ppids: Sequence[int | None],
        starts: Sequence[int | None],
        pstarts: Sequence[int | None],
        sessions: Sequence[str],
        refs: Iterable[int],
        entries: int,
    ) -> None:
        """A run of images linked (`Linker.add_many`) and placed: each the next image of its
        process, a new process a child of its parent (`refs`: each image's shim row, or -1
        - its index in `others`; `entries`: how many are execs)."""
        links = self.linker.add_many(boots, pids, ppids, starts, pstarts, sessions)
        k0 = len(self.i_ref)
        self.i_ref.extend(refs)
        self.i_next.extend([-1] * (len(self.i_ref) - k0))
        self.total += entries
        while len(self.parent) < self.linker.nodes:  # the link columns, -1 a block at a time
            for col in (self.parent, self.kid, self.kid_last, self.sib, self.img, self.img_last):
                col.extend(_UNSET)
        img, img_last, i_next = self.img, self.img_last, self.i_next
        parent_col, kid, kid_last, sib = self.parent, self.kid, self.kid_last, self.sib
        unknown, adopted = links.unknown_parent, links.adopted
        new_node = self._new_node
        count = 0
        k = k0 - 1
        for i, (node, parent) in enumerate(zip(links.node, links.parent, strict=True)):
            k += 1
            if parent == NOT_NEW:  # an image of a known process
                last = img_last[node]
                if last < 0:
                    img[node] = k
                else:
                    i_next[last] = k
                img_last[node] = k
                continue
            boot = boots[i]
            if parent >= 0 and parent == len(self.pid) and i in unknown:
                new_node(boot, self.linker.unknown_pid[parent], None, False)
            new_node(boot, pids[i], starts[i], True)
            img[node] = img_last[node] = k
            count += 1
            if parent >= 0:
                parent_col[node] = parent
                last = kid_last[parent]
                if last < 0:
                    kid[parent] = node
                else:
                    sib[last] = node
                kid_last[parent] = node
            if adopted and i in adopted:  # an unknown node it turned out to be: its children
                orphanage = adopted[i]
                c = kid[orphanage]
                while c >= 0:
                    parent_col[c] = node
                    c = sib[c]
                kid[node], kid_last[node] = kid[orphanage], kid_last[orphanage]
                kid[orphanage] = kid_last[orphanage] = -1
        self.count += count

    # ---- reading back ----------------------------------------------------------------

    def walk(self, root: int) -> Iterator[int]:
        """The subtree of `root`, parents first, children in order (Node.walk's order)."""
        kid, sib = self.kid, self.sib
        stack = [root]
        while stack:
            n = stack.pop()
            yield n
            kids = []
            c = kid[n]
            while c >= 0:
                kids.append(c)
                c = sib[c]
            stack.extend(reversed(kids))

    def ident(self, node: int) -> tuple[str, int, int | None]:
        return (self.boots[self.boot[node]], self.pid_of(node), self.value(self.start, node))

    def image(self, k: int, node: int) -> Image:
        ref = self.i_ref[k]
        if ref < 0:
            return self.others[-1 - ref]
        (cwd, cwd_unknown, shim, target, argv0, sess, path, red, pcmd, args, pargv) = self.statics[
            self.r_static[ref]
        ]
        seg = self.r_seg[ref]
        where = self.wheres[ref] if seg < 0 else f"{self.segs[seg]}@{self.r_off[ref]}"
        t = self.r_time[ref]
        return _make_image(
            "shim",
            where,
            None if math.isnan(t) else _utc(t),
            self.boots[self.boot[node]],
            self.pid_of(node),
            self.value(self.r_ppid, ref),
            self.value(self.r_start, ref),
            self.value(self.r_pstart, ref),
            cwd,
            shim,
            target,
            argv0,
            args,
            sess,
            red,
            None,
            cwd_unknown,
            pcmd,
            path,
            False,
            True,
            (),
            pargv,
        )

    def finish(self) -> array[int]:
        """The roots' node ids, in node order; what only building needed is let go (the
        linker's state, the last child and image of each node: a tenth of the memory)."""
        known, parent, kid = self.known, self.parent, self.kid
        ids = array(
            "i", (n for n in range(len(self.pid)) if parent[n] < 0 and (known[n] or kid[n] >= 0))
        )
        self.linker = Linker()
        self.kid_last, self.img_last = array("i"), array("i")
        n = len(self.pid)
        for col in (self.parent, self.kid, self.sib, self.img):
            del col[n:]
        return ids

    def move(self, node: int, parent: int) -> None:
        """Make `node` the last child of `parent` (family.tree.relink_traced)."""
        old = self.parent[node]
        prev, c = -1, self.kid[old]
        while c != node:
            prev, c = c, self.sib[c]
        if prev < 0:
            self.kid[old] = self.sib[node]
        else:
            self.sib[prev] = self.sib[node]
        self.sib[node] = -1
        self.parent[node] = parent
        c = self.kid[parent]
        if c < 0:
            self.kid[parent] = node
            return
        while self.sib[c] >= 0:
            c = self.sib[c]
        self.sib[c] = node
