"""The relay's pumps in a process of their own (`mcpshim run --mcp` on Linux).

In the supervisor's process the pumps share the interpreter lock with the recorder (json
parsing, redaction) and the sampler, and a message waits for them: 1.8 ms at p95 for one
byte, several ms for 1 MiB. So the supervisor forks, before it starts the server, a child
that does nothing but move bytes: client stdin -> server stdin, server stdout -> client
stdout, with the thread Relay's semantics (a peer that goes away is drained so the other
side never blocks; EOF is passed on; nothing is reordered or altered).

The bytes do not pass through Python: each pump splices what its source holds into a pipe
of its own, tees that into the copy channel (page references, no copy) and splices it on
(pipeio). Only the chunk's length and time go through the interpreter. The copy channel,
read by the recorder child (forkedrelay), is four pipes: the bytes of each direction in one,
an overflow pipe either direction fills when its own is full, and a 14-byte head per copied
part (direction, pipe, time read, length), written after the part's copy and before the
part is passed on, so a request's head always precedes its response's. Both pumps write
heads into that one pipe; a write under PIPE_BUF is atomic. The copy pipes are 1 MiB each,
but a pipe holds 256 pages, however full each is: with the overflow, a 1 MiB message still
crosses without the slow path below while the recorder sleeps (it records between
messages).

The channel never holds back a byte: its writes do not wait. When the recorder falls
behind and the pipes are full, the chunk is read into memory instead, written on from
there, and its copy goes to a backlog that a thread of the child writes out, waiting as
long as it must; while the backlog has anything, every copy joins it, so the order holds.
An fd that splice does not take (a file opened for appending, some devices) is read and
written instead, its copies written from memory.

The child keeps only the fds it pumps, its pipes, a control pipe and stderr; it ignores
SIGINT, SIGTERM and SIGHUP (the supervisor decides its lifetime) and ends when both
directions have reached EOF and their copies are out, or when the control pipe closes (the
supervisor is done with it, or died). The supervisor keeps it out of the family (never
observed, a survivor or reaped: `Supervisor.add_helper`) and reaps it.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import signal
import struct
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import NoReturn

from mcpshim import pipeio
from mcpshim.mcprelay import C2S, S2C, close_end, relay_pipe
from mcpshim.procinfo import LINUX

__all__ = ["DIRECTIONS", "EOF", "HEAD", "OVERFLOW", "available", "keep_only", "pump_main"]

DIRECTIONS = (C2S, S2C)
HEAD = struct.Struct("<BBdI")  # direction index (| EOF), copy pipe, time read, length
OVERFLOW = len(DIRECTIONS)  # the copy pipe both directions fall back on when theirs is full
EOF = 0x80  # the direction ended; the payload is why writing stopped, if it did
_READ = 1 << 20
_FLUSH_S = 5.0  # after the control pipe closes: how long copies may make no progress
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def available() -> bool:
    """The forked relay needs fork() and /proc (to close what it inherits): Linux."""
    return LINUX and hasattr(os, "fork")


# ---- the child -----------------------------------------------------------------------------


def keep_only(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


class _Channel:
    """The copies to the supervisor: heads in one pipe, each direction's bytes in another.
    A pump's calls never wait; what does not fit now goes to the backlog (see the module
    docstring)."""

    def __init__(self, heads: int, data: Sequence[int]) -> None:
        self._heads, self._data = heads, tuple(data)
        for fd in (heads, *data):
            os.set_blocking(fd, False)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._backlog: deque[tuple[int, bytes, bytes]] = deque()  # (fd, bytes, head)
        self.gone = False  # the recorder stopped reading for good: copies are dropped
        self._last_write = 0.0  # when the backlog last got a write out (monotonic)
        threading.Thread(target=self._drain, name="backlog", daemon=True).start()

    def tee(self, index: int, t: float, mid: int, n: int) -> tuple[int, bytes | None]:
        """Copy what can be copied of the `n` bytes waiting in pipe `mid`: (k, None) when
        its first k bytes are copied (splice those on, then call again for the rest), (n,
        bytes) when none could be and the bytes had to be read out of `mid` (write them)."""
        with self._lock:
            if self.gone:
                return n, None
            if not self._backlog:
                for pipe in (index, OVERFLOW):
                    try:
                        k = pipeio.tee(mid, self._data[pipe], n)
                    except OSError:
                        self._lost()
                        return n, None
                    if k:
                        self._head(HEAD.pack(index, pipe, t, k))
                        return k, None
            data = pipeio.read_exactly(mid, n)
            self._later(self._data[index], data, HEAD.pack(index, index, t, n))
            return n, data

    def write(self, index: int, t: float, data: bytes) -> None:
        """Copy a chunk that is in memory already (or, with index | EOF, an end)."""
        head = HEAD.pack(index, index & ~EOF, t, len(data))
        fd = self._data[index & ~EOF]
        with self._lock:
            if self.gone:
                return
            done = 0
            if not self._backlog:
                done = self._now(fd, data)
                if done == len(data):
                    self._head(head)
                    return
            self._later(fd, data[done:], head)

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

    def _later(self, fd: int, data: bytes, head: bytes) -> None:
        self._backlog.append((fd, data, head))
        self._changed.notify_all()

    def _lost(self) -> None:
        self.gone = True
        self._backlog.clear()
        self._changed.notify_all()

    def _drain(self) -> None:
        """Write the backlog out in order, waiting for room; an item leaves the backlog
        only once written, so no pump can overtake it."""
        while True:
            with self._lock:
                while not self._backlog:
                    self._changed.wait()
                fd, data, head = self._backlog[0]
            try:
                pipeio.write_all(fd, data, self._progressed)
                pipeio.write_all(self._heads, head, self._progressed)
            except OSError:
                with self._lock:
                    self._lost()
                continue
            with self._lock:
                if self._backlog:
                    self._backlog.popleft()
                self._changed.notify_all()

    def _progressed(self) -> None:
        self._last_write = time.monotonic()

    def flush(self, give_up: threading.Event, grace: float) -> None:
        """Wait until every copy is out; once `give_up` is set, only while the recorder
        keeps taking them: `grace` seconds without a write and the rest is dropped. A
        recorder that is slow (a busy machine) loses nothing; one that is stuck does not
        keep this process alive."""
        since: float | None = None
        with self._lock:
            while self._backlog and not self.gone:
                if give_up.is_set():
                    now = time.monotonic()
                    since = since or now
                    if now - max(since, self._last_write) >= grace:
                        return
                self._changed.wait(0.1)


class _Pump:
    """One direction: src -> our pipe -> dst, a copy of each chunk to the channel."""

    def __init__(self, src: int, dst: int, index: int, channel: _Channel) -> None:
        self.src, self.dst, self.index, self.channel = src, dst, index, channel
        self.splice_in = self.splice_out = pipeio.SPLICE_OK
        self.mid_r, self.mid_w = relay_pipe()
        import fcntl

        for fd in (src, dst):
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
        self.broken = ""

    def run(self) -> None:
        while True:
            try:
                more = self._step()
            except OSError:
                more = False  # the source failed: an end, as read() failing is
            if not more:
                break
        if not self.broken:
            close_end(self.dst)
        self.channel.write(self.index | EOF, time.time(), self.broken.encode())

    def _step(self) -> bool:
        if not self.splice_in:
            data = pipeio.read_some(self.src, _READ)
            if not data:
                return False
            self.channel.write(self.index, time.time(), data)
            self._write(data)
            return True
        try:
            n = pipeio.splice_some(self.src, self.mid_w, _READ)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            self.splice_in = False  # a source splice does not take: read it
            return True
        if not n:
            return False
        t = time.time()
        while n:
            k, held = self.channel.tee(self.index, t, self.mid_r, n)
            n -= k
            if held is not None:
                self._write(held)
            elif self.broken:
                pipeio.read_exactly(self.mid_r, k)  # nobody reads: drop it, keep draining
            elif not self.splice_out:
                self._write(pipeio.read_exactly(self.mid_r, k))
            else:
                moved, err = pipeio.splice_all(self.mid_r, self.dst, k)
                if err is not None:
                    rest = pipeio.read_exactly(self.mid_r, k - moved)
                    if err.errno == errno.EINVAL:
                        self.splice_out = False  # a destination splice does not take: write
                        self._write(rest)
                    else:
                        self._stop(err)
        return True

    def _write(self, data: bytes) -> None:
        if not self.broken:
            try:
                pipeio.write_all(self.dst, data)
            except OSError as exc:
                self._stop(exc)

    def _stop(self, exc: OSError) -> None:
        # The reader is gone: keep draining so the writer never blocks on us.
        self.broken = exc.strerror or str(exc)
        close_end(self.dst)


def pump_main(
    pumps: Sequence[tuple[int, int]], heads: int, data: Sequence[int], ctl_r: int, status: int
) -> NoReturn:
    """The pump child's whole life: forward both ways until both end or `ctl_r` closes;
    one byte (the direction's index) to `status` as each direction ends."""
    for sig in _FORWARDED:
        signal.signal(sig, signal.SIG_IGN)
    gc.disable()  # nothing here makes cycles; no collector pause on the forwarding path
    keep_only({2, heads, ctl_r, status, *data, *(fd for pair in pumps for fd in pair)})
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
        comm.write("mcpshim-relay")
    channel = _Channel(heads, data)
    over, closed = threading.Event(), threading.Event()
    running = [len(pumps)]
    lock = threading.Lock()

    def pump(p: _Pump) -> None:
        p.run()
        with contextlib.suppress(OSError):
            os.write(status, bytes([p.index]))
        with lock:
            running[0] -= 1
            if not running[0]:
                over.set()

    def control() -> None:
        with contextlib.suppress(OSError):
            while os.read(ctl_r, 64):
                pass
        closed.set()
        over.set()

    for index, (src, dst) in enumerate(pumps):
        worker = _Pump(src, dst, index, channel)
        threading.Thread(target=pump, args=(worker,), daemon=True).start()
    threading.Thread(target=control, daemon=True).start()
    over.wait()
    channel.flush(closed, _FLUSH_S)
    os._exit(0)
