"""The forest of a whole log in columns, for `tree` over a million records.

`tree.build_forest` keeps a `Node` and an `Image` object per record: about 700 bytes each,
700 MB for a million. Here a process is a row of integer arrays (its parent, its first
child and next sibling, its first and last image) and a shim's image is a row too: its
time as a float, its integers, its place in the log as (segment, offset), and an index
into a table of the values images share (cwd, command, argv, target, session, PATH...),
which a log repeats. Images of other sources (observed, traced) stay `Image` objects.

Linking is `tree.Linker`'s, exactly as in `build_forest`, so the forest is the same; its
roots are `Node` trees made one at a time as a renderer asks for them (`Forest.roots` is
a sequence that builds each root's subtree on access), so the views need no change and
memory holds the columns plus one family's objects.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from mcpshim.base.frozen import positional
from mcpshim.family.images import Image
from mcpshim.family.tree import Forest, Linker, Node
from mcpshim.log.execlog import ExecRecord, Record, Tail, _utc

__all__ = ["CompactRoots", "build_compact_forest", "forest_of"]

_NONE = -(1 << 63)  # None in an int column
_WIDE = _NONE + 1  # a value wider than int64 (a pid may have 19 digits): in _Columns.wide
_MAX = (1 << 63) - 1
_make_image = positional(Image)
#: -1 for the link columns of nodes to come; they run ahead of `pid`, whose length counts
_UNSET = array("i", [-1]) * 4096


class _Columns:
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

    def _pid(self, node: int) -> int:
        pid = self._get(self.pid, node)
        assert pid is not None  # a node's pid (an unknown node's: the ppid it stands for)
        return pid

    def _get(self, col: array[int], i: int) -> int | None:
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
        node = len(self.pid) - 1
        if node >= len(self.parent):  # the links start as -1, a block at a time
            for col in (self.parent, self.kid, self.kid_last, self.sib, self.img, self.img_last):
                col.extend(_UNSET)
        return node

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

    def _row(self, rec: ExecRecord) -> int:
        sid = self._static(
            Tail(
                rec.cwd,
                rec.cwd_unknown,
                rec.shim,
                rec.target,
                rec.invoked_as,
                rec.session,
                rec.path,
                rec.redactions,
                rec.parent_cmdline,
                rec.args,
                rec.parent_argv,
            )
        )
        row = len(self.r_static)
        seg, sep, off = rec.where.rpartition("@")
        if sep and off.isascii() and off.isdigit() and str(int(off)) == off:
            self.r_seg.append(self._seg(seg))
            self.r_off.append(int(off))
        else:
            self.r_seg.append(-1)
            self.r_off.append(0)
            self.wheres[row] = rec.where
        t = math.nan if rec.btime is None or rec.uptime is None else rec.btime + rec.uptime
        self.r_time.append(t)
        self._put(self.r_ppid, rec.ppid)
        self._put(self.r_start, rec.start)
        self._put(self.r_pstart, rec.parent_start)
        self.r_static.append(sid)
        return row

    def _append_image(self, node: int, ref: int) -> None:
        k = len(self.i_ref)
        self.i_ref.append(ref)
        self.i_next.append(-1)
        last = self.img_last[node]
        if last < 0:
            self.img[node] = k
        else:
            self.i_next[last] = k
        self.img_last[node] = k

    def _chain(self, node: int) -> Iterator[int]:
        k = self.img[node]
        while k >= 0:
            yield k
            k = self.i_next[k]

    def add_image(self, img: Image, rec: ExecRecord | None = None) -> None:
        """One image of the process model (family.model); a shim's (`rec`) goes in as a row."""
        if rec is not None:
            ref = self._row(rec)
        else:
            ref = -1 - len(self.others)
            self.others.append(img)
        self._link(img.boot_id, img.pid, img.ppid, img.start, img.parent_start,
                   img.session, ref, img.entry)  # fmt: skip

    def _link(
        self,
        boot: str,
        pid: int,
        ppid: int | None,
        start: int | None,
        pstart: int | None,
        sess: str,
        ref: int,
        entry: bool = True,
    ) -> None:
        link = self.linker.add(boot, pid, ppid, start, pstart, sess)
        self.total += entry
        if not link.new:
            self._append_image(link.node, ref)
            return
        if link.unknown_parent and link.parent == len(self.pid):
            assert link.parent is not None
            self._new_node(boot, self.linker.unknown_pid[link.parent], None, False)
        node = self._new_node(boot, pid, start, True)
        k = len(self.i_ref)  # its first image (_append_image, for a node that has none)
        self.i_ref.append(ref)
        self.i_next.append(-1)
        self.img[node] = self.img_last[node] = k
        self.count += 1
        parent = link.parent
        if parent is not None:  # _adopt_child
            self.parent[node] = parent
            last = self.kid_last[parent]
            if last < 0:
                self.kid[parent] = node
            else:
                self.sib[last] = node
            self.kid_last[parent] = node
        if link.adopted is not None:
            orphanage = link.adopted
            c = self.kid[orphanage]
            while c >= 0:
                self.parent[c] = node
                c = self.sib[c]
            self.kid[node], self.kid_last[node] = self.kid[orphanage], self.kid_last[orphanage]
            self.kid[orphanage] = self.kid_last[orphanage] = -1

    # ---- reading back ----------------------------------------------------------------

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
            self._pid(node),
            self._get(self.r_ppid, ref),
            self._get(self.r_start, ref),
            self._get(self.r_pstart, ref),
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

    def node(self, i: int, parent: Node | None) -> Node:
        imgs = [self.image(k, i) for k in self._chain(i)]
        boot = self.boots[self.boot[i]]
        return Node(
            i,
            boot,
            self._pid(i),
            self._get(self.start, i),
            bool(self.known[i]),
            imgs,
            [],
            parent,
        )

    def subtree(self, root: int) -> Node:
        top = self.node(root, None)
        stack = [(root, top)]
        while stack:
            i, n = stack.pop()
            c = self.kid[i]
            while c >= 0:
                child = self.node(c, n)
                n.children.append(child)
                stack.append((c, child))
                c = self.sib[c]
        return top


class CompactRoots(Sequence[Node]):
    """The roots in node order, each built (with its subtree) when asked for."""

    def __init__(self, cols: _Columns, ids: array[int]) -> None:
        self._cols, self._ids = cols, ids

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, i: int) -> Node: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Node]: ...
    def __getitem__(self, i: int | slice) -> Node | Sequence[Node]:
        if isinstance(i, slice):
            return [self._cols.subtree(r) for r in self._ids[i]]
        return self._cols.subtree(self._ids[i])

    def __iter__(self) -> Iterator[Node]:
        for r in self._ids:
            yield self._cols.subtree(r)


def build_compact_forest(records: Iterable[Record], session: str | None = None) -> Forest:
    """`build_forest(entries(records, session))`, the same forest, kept in columns."""
    from mcpshim.family.model import Assembler, every_session

    cols = _Columns()
    model = Assembler(session, keep_net=every_session)
    for rec in records:
        for img in model.feed(rec):
            own = rec if isinstance(rec, ExecRecord) and img.source == "shim" else None
            cols.add_image(img, own)
    for img in model.finish():
        cols.add_image(img)
    forest = forest_of(cols)
    forest.net = model.net
    return forest


def forest_of(cols: _Columns) -> Forest:
    """The forest of built columns; what only building needed is let go (the linker's
    state, the last child and image of each node: a tenth of the memory)."""
    known, parent, kid = cols.known, cols.parent, cols.kid
    ids = array(
        "i", (n for n in range(len(cols.pid)) if parent[n] < 0 and (known[n] or kid[n] >= 0))
    )
    cols.linker = Linker()
    cols.kid_last, cols.img_last = array("i"), array("i")
    n = len(cols.pid)
    for col in (cols.parent, cols.kid, cols.sib, cols.img):
        del col[n:]
    return Forest(CompactRoots(cols, ids), cols.count, cols.total)
