"""What a loss mark of the copy channel holds (relay.channel): the copies the recorder
could not be given, counted, and the short lines among them, kept.

When the recorder falls behind and the channel's backlog reaches its limit, copies are
dropped until what waited before them is out. A flood (one line of 200 MB) then took with
it the answer that followed, and review said "no answer" for a call that was answered. So
a loss keeps, in the order read, every line of up to LINE_KEEP bytes that goes by while it
is open (KEEP_MAX in all), and counts the rest; its first piece of each direction goes on
the line the recorder was reading when the loss began (nothing of that direction was
dropped before it). Written out, the mark carries per direction what was dropped in all
(the LOSS head, which `mcp-unrecorded` reports) and then its entries: a line kept, or a
run of bytes dropped there, each with the number of a chunk in it. The pump lists them as it
handles each direction, so the recorder replays them on its framers in the order of those
numbers (a request before its answer): every line kept is recorded where it was, and a line
that lost any byte is not.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mcpshim.relay.framer import Dropped

__all__ = ["KEEP_MAX", "LINE_KEEP", "LOSS", "Entry", "Loss", "unpack_entries", "unpack_loss"]

LINE_KEEP = 64 << 10  # a line going by while a loss is open is kept up to this long
KEEP_MAX = 1 << 20  # what one loss keeps in all (an entry counts _ENTRY bytes more)
_DIRECTIONS = 2
LOSS = struct.Struct("<Q" + "QQ?" * _DIRECTIONS)  # limit, then per direction (Dropped)
# an entry: dropped (1) or kept (0), direction, number, time read, pid mark, length
_ENTRY = struct.Struct("<BBQdiI")
_DROP = struct.Struct("<QQ?")


@dataclass
class Entry:
    """A line kept (`data`), or bytes dropped there (`dropped`), of one direction; `at`
    (number, time read, pid mark) is the last chunk's that added to it."""

    index: int
    at: tuple[int, float, int]
    data: bytearray | None = None
    dropped: Dropped | None = None


class Loss:
    """One loss mark (see the module docstring). `keep` False: nothing is kept (copies
    the recorder will never take)."""

    def __init__(self, t: float, keep: bool = True) -> None:
        self.t = t  # when the first copy was dropped
        self.last = -1  # the highest number dropped
        self.sealed = False
        self.keep = keep
        self.entries: list[Entry] = []
        self.kept = 0  # bytes kept, entries counted
        self.open: list[Entry | None] = [None] * _DIRECTIONS  # the line each is inside

    def add(self, index: int, seq: int, data: bytes, t: float = 0.0, mark: int = -1) -> None:
        self.last = max(self.last, seq)
        pos, end = 0, len(data)
        while pos < end:
            nl = data.find(b"\n", pos)
            stop = end if nl < 0 else nl + 1
            self._piece(index, data[pos:stop], nl >= 0, (seq, t, mark))
            pos = stop

    def _room(self, more: int) -> bool:
        return self.keep and self.kept + more <= KEEP_MAX

    def _piece(self, index: int, piece: bytes, ends: bool, at: tuple[int, float, int]) -> None:
        e = self.open[index]
        if e is None and len(piece) <= LINE_KEEP and self._room(len(piece) + _ENTRY.size):
            e = Entry(index, at, bytearray(piece))
            self.entries.append(e)
            self.kept += len(piece) + _ENTRY.size
        elif e is not None and e.data is not None:
            if len(e.data) + len(piece) <= LINE_KEEP and self._room(len(piece)):
                e.data += piece
                e.at = at
                self.kept += len(piece)
            else:  # too long to keep: the line is dropped, what was kept of it too
                self.kept -= len(e.data)
                e.dropped = Dropped()
                e.dropped.add(bytes(e.data))
                e.data = None
                e.dropped.add(piece)
        else:
            e = e or self._drop_entry(index, at)
            assert e.dropped is not None
            e.dropped.add(piece)
        self.open[index] = None if ends else e

    def _drop_entry(self, index: int, at: tuple[int, float, int]) -> Entry:
        """The direction's last entry when it dropped bytes too (runs of drops merge),
        else a new one."""
        last = next((e for e in reversed(self.entries) if e.index == index), None)
        if last is not None and last.dropped is not None:
            return last
        e = Entry(index, at, dropped=Dropped())
        self.entries.append(e)
        self.kept += _ENTRY.size
        return e

    def totals(self, kept_too: bool = True) -> list[Dropped]:
        """What each direction lost in all; `kept_too`: its kept lines counted as lost
        (copies the recorder will never take)."""
        out = [Dropped() for _ in range(_DIRECTIONS)]
        for e in self.entries:
            if e.dropped is not None:
                out[e.index].merge(e.dropped)
            elif kept_too and e.data is not None:
                out[e.index].add(bytes(e.data))
        return out

    def absorb(self, other: Loss) -> None:
        """Count another mark's copies, kept lines too, as lost here."""
        self.last = max(self.last, other.last)
        for index, lost in enumerate(other.totals()):
            if lost.size:
                e = self._drop_entry(index, (other.last, other.t, -1))
                assert e.dropped is not None
                e.dropped.merge(lost)

    def packed(self, limit: int, entries: bool = True) -> bytes:
        """The LOSS head, then each entry; without `entries`, the head alone, counting
        the kept lines as lost."""
        fields = [f for d in self.totals(not entries) for f in (d.size, d.newlines, d.clean)]
        out = [LOSS.pack(limit, *fields)]
        for e in self.entries if entries else ():
            seq, t, mark = e.at
            if e.dropped is not None:
                kind, body = 1, _DROP.pack(e.dropped.size, e.dropped.newlines, e.dropped.clean)
            else:
                kind, body = 0, bytes(e.data or b"")
            out += [_ENTRY.pack(kind, e.index, seq, t, mark, len(body)), body]
        return b"".join(out)


def unpack_loss(payload: bytes) -> tuple[int, list[Dropped]]:
    """The limit and what each direction lost, from a LOST head's payload."""
    limit, *fields = LOSS.unpack_from(payload)
    return limit, [Dropped(*fields[i : i + 3]) for i in range(0, len(fields), 3)]


def unpack_entries(payload: bytes) -> list[Entry]:
    """The entries after the LOSS head, in order."""
    out: list[Entry] = []
    pos = LOSS.size
    while pos + _ENTRY.size <= len(payload):
        kind, index, seq, t, mark, n = _ENTRY.unpack_from(payload, pos)
        pos += _ENTRY.size
        body = payload[pos : pos + n]
        pos += n
        if kind:
            size, newlines, clean = _DROP.unpack(body)
            out.append(Entry(index, (seq, t, mark), dropped=Dropped(size, newlines, clean)))
        else:
            out.append(Entry(index, (seq, t, mark), bytearray(body)))
    return out
