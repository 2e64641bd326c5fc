"""The copy channel: how the relay child's copies reach the recorder child (relay.forked).

Five pipes: the bytes of each direction in one, an overflow pipe either direction fills
when its own is full, a 26-byte head per copied part (direction, pipe, number, time read,
length, pid counter), and a bell, rung once the server's output has been passed on: the
recorder sleeps until then. Heads are written after the chunk has gone on, so a response's
head may reach the pipe before its request's; the number, taken before the chunk goes on,
is what orders them (forked.InOrder). Both pumps write heads into that one pipe; a write
under PIPE_BUF is atomic. The copy pipes start at 64 KiB and grow to 1 MiB the first time
they are full (a pipe holds 256 pages then, however full each is): with the overflow, a
1 MiB message crosses without the slow path below while the recorder sleeps (it records
between messages).

The channel never holds back a byte: its writes do not wait. When the recorder falls
behind and the pipes are full, the duplicate is read into memory instead and goes to a
backlog that a thread of the child writes out, waiting as long as it must; while the
backlog has anything, every copy joins it, so the order holds.

The backlog is bounded (COPY_LIMIT): a copy that would take it past the limit is dropped,
and so is every copy after it until the backlog before them has been written out. A loss
mark stands in the backlog in their place, counting what each direction lost (Dropped);
written out, it carries the highest number it covers (LOST), so the recorder knows not to
wait for those, and records the loss where it happened in each direction's stream. A mark
keeps the short lines that go by while it is open (relay.loss): a flood costs the recorder
the flood, not the answer after it.
"""

from __future__ import annotations

import itertools
import os
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from mcpshim.base import fdio
from mcpshim.relay import pipeio
from mcpshim.relay.core import C2S, COPY_LIMIT, S2C
from mcpshim.relay.loss import LOSS, Loss

__all__ = [
    "DIRECTIONS",
    "EOF",
    "HEAD",
    "LOST",
    "MORE",
    "OVERFLOW",
    "REPORT",
    "Channel",
]

DIRECTIONS = (C2S, S2C)
# direction index | flags, copy pipe, number, time read, length, the pid counter (PidMark)
HEAD = struct.Struct("<BBQdIi")
OVERFLOW = len(DIRECTIONS)  # the copy pipe both directions fall back on when theirs is full
EOF = 0x80  # the direction ended; the payload is why writing stopped, if it did
MORE = 0x40  # the chunk goes on in the next head of the same number (it filled a pipe)
LOST = 0x20  # copies were dropped, numbers up to this head's: the payload is a Loss packed
_LARGE_COPY = 1 << 20  # what the copy pipes grow to, the first time they are full


#: what the pump child reports of copies it could not give the recorder at all: the time
#: of the first, then a LOSS payload
REPORT = struct.Struct("<d" + LOSS.format[1:])


class Channel:
    """The copies to the recorder: heads in one pipe, each direction's bytes in another.
    A pump's calls never wait; what does not fit now goes to the backlog (see the module
    docstring)."""

    def __init__(self, heads: int, data: Sequence[int], limit: int = COPY_LIMIT) -> None:
        self._heads, self._data = heads, tuple(data)
        for fd in (heads, *data):
            os.set_blocking(fd, False)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._backlog: deque[tuple[int, bytes, bytes] | Loss] = deque()  # (fd, bytes, head)
        self._limit = limit
        self._held = 0  # bytes in the backlog
        self._numbers = itertools.count()
        self._grown = False
        self.gone = False  # the recorder stopped reading for good: copies are dropped
        self.abandoned: Loss | None = None  # what was dropped since (reported at the end)
        self._last_write = 0.0  # when the backlog last got a write out (monotonic)

    def start(self) -> None:
        threading.Thread(target=self._drain, name="backlog", daemon=True).start()

    def number(self) -> int:
        """The next chunk's place in the order bytes were read, both directions together.
        Taken before the chunk is passed on: what the chunk causes gets a later number."""
        return next(self._numbers)  # one step under the interpreter lock: never shared

    def copy(self, index: int, seq: int, t: float, probe: int, n: int, mark: int) -> None:
        """Move the `n` bytes waiting in pipe `probe` (a duplicate of a chunk) into the
        channel: into the direction's pipe, the overflow pipe, or the backlog, a head for
        each part. The first time the pipes are full they grow, once."""
        with self._lock:
            if not self.gone and not self._backlog:
                n = self._splice_parts(index, seq, t, probe, n, mark)
                if n and not self._grown:
                    self._grown = True
                    for fd in self._data:
                        pipeio.grow(fd, _LARGE_COPY)
                    n = self._splice_parts(index, seq, t, probe, n, mark)
            if not n:
                return
            data = fdio.read_exactly(probe, n)  # the probe is left empty, whatever comes
            if self.gone:
                self._abandon(t).add(index, seq, data)
            else:
                head = HEAD.pack(index, index, seq, t, n, mark)
                self._later(self._data[index], data, head, (index, seq))

    def _splice_parts(self, index: int, seq: int, t: float, probe: int, n: int, mark: int) -> int:
        """Splice what fits into the direction's pipe, then the overflow pipe, a head for
        each part: how many bytes are left in the probe."""
        for pipe in (index, OVERFLOW):
            try:
                k = pipeio.splice_now(probe, self._data[pipe], n)
            except OSError:
                self._lost()
                return n
            if k:
                n -= k
                self._head(HEAD.pack(index | (MORE if n else 0), pipe, seq, t, k, mark))
                if not n:
                    return 0
        return n

    def write(self, index: int, seq: int, t: float, data: bytes, mark: int = -1) -> None:
        """Copy a chunk that is in memory already (or, with index | EOF, an end)."""
        head = HEAD.pack(index, index & ~EOF, seq, t, len(data), mark)
        fd = self._data[index & ~EOF]
        with self._lock:
            if self.gone:
                if not index & EOF:
                    self._abandon(t).add(index, seq, data)
                return
            done = 0
            if not self._backlog:
                done = self._now(fd, data)
                if done == len(data):
                    self._head(head)
                    return
            # Never drop an end, nor the rest of a chunk partly in its pipe already.
            self._later(fd, data[done:], head, None if index & EOF or done else (index, seq))

    def _now(self, fd: int, data: bytes) -> int:
        if not data:
            return 0
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0
        except OSError:
            self._lost()
            return len(data)

    def _head(self, head: bytes) -> None:
        if self._now(self._heads, head) != len(head):  # short of PIPE_BUF: all or nothing
            self._later(self._heads, b"", head)

    def _later(
        self, fd: int, data: bytes, head: bytes, droppable: tuple[int, int] | None = None
    ) -> None:
        """Into the backlog; a copy (`droppable`: its direction and number) is dropped
        instead when it would take the backlog past the limit, or a loss mark is last."""
        tail = self._backlog[-1] if self._backlog else None
        if droppable is not None:
            marking = isinstance(tail, Loss) and not tail.sealed
            if marking or self._held + len(data) > self._limit:
                _flags, _pipe, _seq, t, _n, mark = HEAD.unpack(head)
                if not isinstance(tail, Loss) or tail.sealed:
                    tail = Loss(t)
                    self._backlog.append(tail)
                tail.add(*droppable, data, t, mark)
                return
        self._backlog.append((fd, data, head))
        self._held += len(data)
        self._changed.notify_all()

    def _lost(self) -> None:
        """The recorder is gone (or stuck): what waits for it is dropped, and counted."""
        self.gone = True
        for item in self._backlog:
            if isinstance(item, Loss):
                self._abandon(item.t).absorb(item)
                continue
            flags, _pipe, seq, t, _n, _mark = HEAD.unpack(item[2])
            if item[1] and not flags & EOF:
                self._abandon(t).add(flags & ~(MORE | LOST), seq, item[1])
        self._backlog.clear()
        self._held = 0
        self._changed.notify_all()

    def _abandon(self, t: float) -> Loss:
        if self.abandoned is None:
            self.abandoned = Loss(t, keep=False)
        return self.abandoned

    def report(self) -> bytes:
        """What was dropped because the recorder went away or got stuck (REPORT), or b"":
        the pump child hands it to the supervisor, which records it."""
        if self.abandoned is None:
            return b""
        return struct.pack("<d", self.abandoned.t) + self.abandoned.packed(self._limit, False)

    def _drain(self) -> None:
        """Write the backlog out in order, waiting for room; an item leaves the backlog
        only once written, so no pump can overtake it."""
        while True:
            with self._lock:
                while not self._backlog:
                    self._changed.wait()
                item = self._backlog[0]
                if isinstance(item, Loss):
                    item.sealed = True  # what is dropped from now on needs a mark of its own
                    data = item.packed(self._limit)
                    head = HEAD.pack(LOST, OVERFLOW, item.last, item.t, len(data), -1)
                    fd, held = self._data[OVERFLOW], 0
                else:
                    fd, data, head = item
                    held = len(data)
            try:
                fdio.write_all(fd, data, self._progressed)
                fdio.write_all(self._heads, head, self._progressed)
            except OSError:
                with self._lock:
                    self._lost()
                continue
            with self._lock:
                if self._backlog:
                    self._backlog.popleft()
                    self._held -= held
                self._changed.notify_all()

    def _progressed(self) -> None:
        self._last_write = time.monotonic()

    def flush(
        self, give_up: threading.Event, grace: float, working: Callable[[], float | None]
    ) -> None:
        """Wait until every copy is out; once `give_up` is set, only while the recorder
        makes progress: it takes copies, or it works (`working`: its CPU time so far). A
        recorder that is slow, on a busy machine, loses nothing; one that did neither for
        `grace` seconds is stuck, and the rest is dropped (counted in `abandoned`)."""
        since = worked = None
        with self._lock:
            while self._backlog and not self.gone:
                if give_up.is_set():
                    now, used = time.monotonic(), working()
                    if since is None or used != worked or self._last_write > since:
                        since, worked = now, used
                    elif now - since >= grace:
                        self._lost()
                        return
                self._changed.wait(0.1)
