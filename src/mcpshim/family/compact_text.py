"""The text view of a forest in columns, printed straight from the columns.

`render.text.iter_tree_text` walks `Node` objects; a compact forest (family.compact) would
build a Node and an Image per process and image first, which costs as much as printing.
Here the same lines come from the arrays: a shim image's text after its time stamp is made
once per command line (the log repeats them), a stamp's date and time to the second once
per second, and images of other sources (observed, traced) are printed by the view's own
`image_text`. tests/family/test_compact.py holds the two printers to the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timezone

from mcpshim.base.display import escape, quote_arg, quote_argv, safe
from mcpshim.family.compact import _WIDE, CompactRoots, _Columns
from mcpshim.family.images import Image
from mcpshim.family.netfacts import NetFacts
from mcpshim.log.boot import MAX_SECONDS
from mcpshim.log.logview import cwd_text

__all__ = ["compact_lines", "net_lines", "stamp_of_seconds"]

_SECONDS: dict[int, str] = {}


def stamp_of_seconds(t: float) -> str:
    """family.view.stamp of the time `t` (UTC seconds, NaN for unknown), without a datetime
    per image: the microseconds are rounded as datetime.fromtimestamp rounds them (half to
    even), and the text up to the second is kept per second."""
    if not 0 <= t < MAX_SECONDS:  # NaN too
        return "?"
    frac, whole = math.modf(t)
    us = round(frac * 1e6)
    if us >= 1_000_000:
        us -= 1_000_000
        whole += 1.0
    sec = int(whole)
    head = _SECONDS.get(sec)
    if head is None:
        if len(_SECONDS) >= 1 << 16:
            _SECONDS.clear()
        d = datetime.fromtimestamp(sec, tz=timezone.utc)
        if d.year < 1000:
            head = d.strftime("%Y-%m-%dT%H:%M:%S")
        else:
            head = f"{d.year}-{d.month:02}-{d.day:02}T{d.hour:02}:{d.minute:02}:{d.second:02}"
        _SECONDS[sec] = head
    return f"{head}.{us // 1000:03}Z"


def net_lines(pad: str, said: Iterable[str]) -> Iterator[str]:
    """The lines under an exec for what it did on the network (family.netfacts' words)."""
    for phrase in said:
        yield f"{pad}net: {escape(phrase)}"


class _Printer:
    def __init__(
        self,
        cols: _Columns,
        supervisors: Mapping[tuple[str, int], str],
        mark: Callable[[str], str] | None,
        image_text: Callable[[Image], str],
        net: NetFacts | None = None,
    ) -> None:
        self.c = cols
        self.supervisors = supervisors
        self.mark = mark
        self.image_text = image_text
        self.net = net if net is not None and net.by_ident else None
        self.rest: list[str | None] = [None] * len(cols.statics)

    def _rest(self, sid: int) -> str:
        """render.text._image_text's text after the stamp, for a shim image's static."""
        text = self.rest[sid]
        if text is None:
            st = self.c.statics[sid]
            shim, target, pcmd, args = st.shim, st.target, st.parent_cmdline, st.args
            parent = quote_argv(st.parent_argv) if st.parent_argv else ""
            parent = parent or (quote_arg(pcmd) if pcmd else "")
            text = self.rest[sid] = (
                f"{quote_argv([shim.encode(), *args])}  -> {escape(target) if target else '?'}"
                + (f"  started by {parent}" if parent else "")
            )
        return text

    def _where(self, ref: int) -> str:
        c = self.c
        seg = c.r_seg[ref]
        return c.wheres[ref] if seg < 0 else f"{c.segs[seg]}@{c.r_off[ref]}"

    def image(self, k: int) -> tuple[str, bytes, str]:
        """(text after the node's head or `exec`, cwd, cwd_unknown) of image k."""
        c = self.c
        ref = c.i_ref[k]
        if ref < 0:
            img = c.others[-1 - ref]
            return self.image_text(img), img.cwd, img.cwd_unknown
        sid = c.r_static[ref]
        static = c.statics[sid]
        return f"[shim] {stamp_of_seconds(c.r_time[ref])} {self._rest(sid)}", static[0], static[1]

    def _mark_of(self, k: int) -> str:
        if self.mark is None:
            return ""
        ref = self.c.i_ref[k]
        word = self.mark(self.c.others[-1 - ref].where if ref < 0 else self._where(ref))
        return f"  [{word}]" if word else ""

    def _cwd_of(self, k: int) -> bytes:
        ref = self.c.i_ref[k]
        return self.c.others[-1 - ref].cwd if ref < 0 else self.c.statics[self.c.r_static[ref]][0]

    def _parent_cwd(self, node: int) -> bytes | None:
        c = self.c
        p = c.parent[node]
        while p >= 0 and c.img[p] < 0:
            p = c.parent[p]
        return self._cwd_of(c.img_last[p]) if p >= 0 else None

    def _said(self, node: int) -> dict[int, list[str]]:
        """netfacts' lines of a process by its images' order (an empty dict: none)."""
        c, net = self.c, self.net
        if net is None or not c.known[node]:
            return {}
        ident = (c.boots[c.boot[node]], c._pid(node), c._get(c.start, node))
        if ident not in net.by_ident:
            return {}
        return net.said_at(ident, [c.image(k, node) for k in c._chain(node)])

    def _head(self, node: int) -> str:
        c = self.c
        pid = c._pid(node)
        if c.known[node]:
            return f"{pid}"
        boot = c.boots[c.boot[node]]
        known = self.supervisors.get((boot, pid))
        if known is not None:
            return f"{pid} {safe(known)}"
        return f"? {pid} (parent not in log) boot {escape(boot[:8])}"

    def lines(self, root: int) -> Iterator[str]:
        """One root's lines, as render.text.iter_tree_text makes them from its Nodes. The
        common case (a known process, a shim's image) is inlined: a million lines."""
        c = self.c
        kid, sib, img, nxt, iref = c.kid, c.sib, c.img, c.i_next, c.i_ref
        pids, known, r_static, r_time, statics = c.pid, c.known, c.r_static, c.r_time, c.statics
        rests, marking = self.rest, self.mark is not None
        # (node, lead, cont, the cwd of the nearest ancestor's last image: _parent_cwd)
        stack: list[tuple[int, str, str, bytes | None]] = [(root, "", "", None)]
        while stack:
            node, lead, cont, pcwd = stack.pop()
            pid = pids[node]
            head = str(pid) if known[node] and pid > _WIDE else self._head(node)
            k = img[node]
            if k < 0:
                yield lead + head
                cwd = pcwd
            else:
                prev = pcwd
                pad = under = ""
                said = self._said(node) if self.net is not None else None
                j = 0
                while k >= 0:
                    ref = iref[k]
                    if ref >= 0:
                        sid = r_static[ref]
                        st = statics[sid]
                        cwd, unknown = st[0], st[1]
                        rest = rests[sid]
                        if rest is None:
                            rest = self._rest(sid)
                        text = f"[shim] {stamp_of_seconds(r_time[ref])} {rest}"
                    else:
                        text, cwd, unknown = self.image(k)
                    extra = f"  cwd {cwd_text(cwd, unknown)}" if unknown or cwd != prev else ""
                    mk = self._mark_of(k) if marking else ""
                    if not pad:
                        yield f"{lead}{head} {text}{extra}{mk}"
                        under = f"{cont}{' ' * len(head)} "
                        pad = under + "exec "
                    else:
                        yield f"{pad}{text}{extra}{mk}"
                    if said and j in said:
                        yield from net_lines(under, said[j])
                    j += 1
                    prev = cwd
                    k = nxt[k]
            ch = kid[node]
            if ch < 0:
                continue
            kids = []
            while ch >= 0:
                kids.append(ch)
                ch = sib[ch]
            stack.append((kids.pop(), cont + "└─ ", cont + "   ", cwd))
            if kids:
                mid_lead, mid_cont = cont + "├─ ", cont + "│  "
                for ch in reversed(kids):
                    stack.append((ch, mid_lead, mid_cont, cwd))


def compact_lines(
    roots: CompactRoots,
    supervisors: Mapping[tuple[str, int], str],
    mark: Callable[[str], str] | None,
    image_text: Callable[[Image], str],
    net: NetFacts | None = None,
) -> Iterator[str]:
    """render.text.iter_tree_text's lines after its header, for a compact forest's roots
    (and, with `net`, each exec's socket calls under it)."""
    printer = _Printer(roots._cols, supervisors, mark, image_text, net)
    for root in roots._ids:
        yield ""
        yield from printer.lines(root)
