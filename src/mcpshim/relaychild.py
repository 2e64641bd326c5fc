"""The relay's pumps in a process of their own (`mcpshim run --mcp` on Linux).

In the supervisor's process the pumps share the interpreter lock with the recorder (json
parsing, redaction) and the sampler, and a message waits for them: 1.8 ms at p95 for one
byte, several ms for 1 MiB. So the supervisor forks, before it starts the server, a child
that does nothing but move bytes: client stdin -> server stdin, server stdout -> client
stdout, with the thread Relay's semantics (a peer that goes away is drained so the other
side never blocks; EOF is passed on; nothing is reordered or altered).

The bytes do not pass through Python: each pump tees what its source holds into the copy
channel (page references, no copy) and splices it on (pipeio). A source that is not a pipe
(a socket, a file) is spliced into a pipe of the pump's own first: tee takes pipes only.
Only the chunk's length and time go through the interpreter. The copy channel, read by the
recorder child (forkedrelay), is five pipes: the bytes of each direction in one, an
overflow pipe either direction fills when its own is full, a 14-byte head per copied part
(direction, pipe, time read, length), written after the part's copy and before the part is
passed on, so a request's head always precedes its response's; and a bell, rung once the
server's output (or a large request) has been passed on: the recorder sleeps until then.
Both pumps write heads into that one pipe; a write under PIPE_BUF is atomic. The copy pipes
are 1 MiB each, but a pipe holds 256 pages, however full each is: with the overflow, a 1 MiB
message still crosses without the slow path below while the recorder sleeps (it records
between messages).

The channel never holds back a byte: its writes do not wait. When the recorder falls
behind and the pipes are full, the chunk is read into memory instead, written on from
there, and its copy goes to a backlog that a thread of the child writes out, waiting as
long as it must; while the backlog has anything, every copy joins it, so the order holds.
An fd that splice does not take (a file opened for appending, some devices) is read and
written instead, its copies written from memory.

The child keeps only the fds it pumps, its pipes, a control pipe, a status pipe and stderr; it ignores
SIGINT, SIGTERM and SIGHUP (the supervisor decides its lifetime) and ends when both
directions have reached EOF and their copies are out, or when the control pipe closes (the
supervisor is done with it, or died). The supervisor keeps it out of the family (never
observed, a survivor or reaped: `Supervisor.add_helper`) and reaps it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import os
import select
import signal
import stat
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
# The recorder sleeps through the client's requests (waking it as the server starts work
# cost 0.1 ms a call) unless one is large: recording a 1 MiB request while the server
# parses it keeps that work out of the response's way.
_RING_C2S = 32 << 10
# The pipes to and from both peers: 64 KiB by default, 256 KiB here, so a 256 KiB message
# crosses each in one go rather than in four turns of writer, pump and reader (through a
# real SDK client and server, 0.6 ms of a 7 ms call; 1 MiB pipes gained nothing more).
_PUMPED_PIPE = 256 << 10
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

    def tee(self, index: int, t: float, pipe: int, n: int | None) -> tuple[int, bytes | None]:
        """Copy what can be copied of the `n` bytes waiting in `pipe` (n None: `pipe` is
        the source itself, holding what it holds): (k, None) when its first k bytes are
        copied (splice those on, then call again for the rest), (k, bytes) when none could
        be and k bytes had to be read out of `pipe` (write them); (0, b'') at the source's
        end."""
        with self._lock:
            if not self.gone and not self._backlog:
                for copy in (index, OVERFLOW):
                    try:
                        k = pipeio.tee(pipe, self._data[copy], _READ if n is None else n)
                    except OSError:
                        self._lost()
                        break
                    if k:
                        self._head(HEAD.pack(index, copy, t, k))
                        return k, None
            if self.gone and n is not None:
                return n, None
            data = pipeio.read_some(pipe, _READ) if n is None else pipeio.read_exactly(pipe, n)
            if data and not self.gone:
                self._later(self._data[index], data, HEAD.pack(index, index, t, len(data)))
            return len(data), data

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
    """One direction: src -> dst, a copy of each chunk to the channel. A source that is a
    pipe is teed from where it is; any other goes through a pipe of our own first (tee
    takes pipes only). The bell gets a byte after each chunk of at least `ring_at` bytes
    is passed on."""

    def __init__(
        self, src: int, dst: int, index: int, channel: _Channel, bell: int, ring_at: int
    ) -> None:
        self.src, self.dst, self.index, self.channel = src, dst, index, channel
        self.bell, self.ring_at = bell, ring_at
        self.splice_in = self.splice_out = pipeio.SPLICE_OK
        self.direct = pipeio.SPLICE_OK and _is_pipe(src)
        self.mid_r, self.mid_w = (-1, -1) if self.direct else relay_pipe()
        self.broken = ""
        for fd in (src, dst):
            with contextlib.suppress(OSError, AttributeError):  # not a pipe; over the limit
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PUMPED_PIPE)  # type: ignore[attr-defined, unused-ignore]

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
            if len(data) >= self.ring_at:
                self._ring()
            return True
        if self.direct:
            pipeio.wait_for(self.src, select.POLLIN)
            return self._pass(self.src, time.time(), None)
        try:
            n = pipeio.splice_some(self.src, self.mid_w, _READ)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            self.splice_in = False  # a source splice does not take: read it
            return True
        return bool(n) and self._pass(self.mid_r, time.time(), n)

    def _pass(self, pipe: int, t: float, n: int | None) -> bool:
        """Copy and pass on the `n` bytes in `pipe` (None: what the source `pipe` holds);
        False when the source has ended."""
        while True:
            k, held = self.channel.tee(self.index, t, pipe, n)
            if held is not None:
                if not held:
                    return False
                self._write(held)
            elif self.broken:
                pipeio.read_exactly(pipe, k)  # nobody reads: drop it, keep draining
            elif not self.splice_out:
                self._write(pipeio.read_exactly(pipe, k))
            else:
                moved, err = pipeio.splice_all(pipe, self.dst, k)
                if err is not None:
                    rest = pipeio.read_exactly(pipe, k - moved)
                    if err.errno == errno.EINVAL:
                        self.splice_out = False  # a destination splice does not take: write
                        self._write(rest)
                    else:
                        self._stop(err)
            if k >= self.ring_at:
                self._ring()
            if n is None or not (n := n - k):
                return True

    def _ring(self) -> None:
        with contextlib.suppress(OSError):  # full: rung already; closed: nobody listens
            os.write(self.bell, b"\0")

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


def _is_pipe(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


def pump_main(
    pumps: Sequence[tuple[int, int]],
    heads: int,
    data: Sequence[int],
    bell: int,
    ctl_r: int,
    status: int,
) -> NoReturn:
    """The pump child's whole life: forward both ways until both end or `ctl_r` closes;
    one byte (the direction's index) to `status` as each direction ends; a byte to `bell`
    as the server's output is passed on."""
    for sig in _FORWARDED:
        signal.signal(sig, signal.SIG_IGN)
    gc.disable()  # nothing here makes cycles; no collector pause on the forwarding path
    keep_only({2, heads, bell, ctl_r, status, *data, *(fd for pair in pumps for fd in pair)})
    os.set_blocking(bell, False)
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
        ring_at = 0 if DIRECTIONS[index] == S2C else _RING_C2S
        worker = _Pump(src, dst, index, channel, bell, ring_at)
        threading.Thread(target=pump, args=(worker,), daemon=True).start()
    threading.Thread(target=control, daemon=True).start()
    over.wait()
    channel.flush(closed, _FLUSH_S)
    os._exit(0)
