"""Linking: each record's process (boot id, pid, start time) and its parent and family.

A PID alone is ancestry, not identity: pids are reused. A child is linked to the latest
remembered process with pid == its ppid in its boot that started no later than it (see
`family.tree`). `Linker.add` links one record; `Linker.add_many` links a run of them and
answers in columns (tree and review read runs of rows).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from mcpshim.base.frozen import positional

__all__ = ["Link", "Linker", "Links"]

_RECENT = 4  # processes remembered per (boot, pid): pid reuse needs only the latest few
_NODE = 0xFFFFFFFF  # a packed slot's node bits
NOT_NEW = -2  # Links.parent of a record whose process was already known
NO_PARENT = -1  # Links.parent of a new process without a ppid (or its own pid as ppid)


@dataclass(frozen=True, slots=True)
class Link:
    node: int
    new: bool  # the first image of this process
    parent: int | None  # the parent node (maybe an unknown node) when new
    unknown_parent: bool  # parent is an "unknown" node created for this ppid
    adopted: int | None  # an unknown node this new node turned out to be (merged into it)


class Links(NamedTuple):
    """`Linker.add_many`'s answer, a list entry per record (what `Link` says of one)."""

    node: list[int]
    #: the parent node when new (maybe an unknown node), NO_PARENT without one, NOT_NEW
    parent: list[int]
    family: list[int]  # the node's family right after its record was linked
    unknown_parent: set[int]  # the records whose parent is an "unknown" node
    adopted: dict[int, int]  # record -> the unknown node its new process turned out to be


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

    def add_many(
        self,
        boots: Sequence[str],
        pids: Sequence[int],
        ppids: Sequence[int | None],
        starts: Sequence[int | None],
        pstarts: Sequence[int | None],
        sessions: Sequence[str],
    ) -> Links:
        """`add` of each record in turn (equal sequences, one entry a record), answered as
        columns: what tree and review take for a run of rows."""
        out = Links([], [], [], set(), {})
        family = self.family
        for i, link in enumerate(map(self.add, boots, pids, ppids, starts, pstarts, sessions)):
            out.node.append(link.node)
            if not link.new:
                out.parent.append(NOT_NEW)
            else:
                out.parent.append(NO_PARENT if link.parent is None else link.parent)
            out.family.append(family(link.node))
            if link.unknown_parent:
                out.unknown_parent.add(i)
            if link.adopted is not None:
                out.adopted[i] = link.adopted
        return out
