"""The relay's pumps in a process of their own (`mcpshim run --mcp` on Linux).

In the supervisor's process the pumps share the interpreter lock with the recorder (json
parsing, redaction) and the sampler, and a message waits for them: 1.8 ms at p95 for one
byte, several ms for 1 MiB. So the supervisor forks, before it starts the server, a child
that does nothing but move bytes: client stdin -> server stdin, server stdout -> client
stdout, with the thread Relay's semantics (a peer that goes away is drained so the other
side never blocks; EOF is passed on; nothing is reordered or altered).

The bytes do not pass through Python, and nothing Python does stands between a chunk's
arrival and its passing on: each pump waits in tee(2), which duplicates the chunk into an
empty pipe of the pump's own (the probe) as it wakes; the pump splices the chunk on at
once, and only then moves the duplicate into the copy channel (page references, no copy)
and writes its head. Through a real SDK client and server, doing the copy and the head
first (poll, tee, write, splice) cost up to 0.1 ms a call more. A source that is not a
pipe (a socket, a file) is spliced into a pipe of the pump's own first: tee takes pipes
only, and a splice from a socket holds its destination pipe's lock while it waits for the
socket's next bytes, so spliced straight into the server's stdin it would keep the server
from reading the request it has just delivered (a bare relay that did so stalled every
call when its client gave it a socketpair, as Node's child_process does).

The copy channel, read by the recorder child (forkedrelay), is five pipes: the bytes of
each direction in one, an overflow pipe either direction fills when its own is full, a
26-byte head per copied part (direction, pipe, number, time read, length, pid counter), and a bell,
rung once the server's output has been passed on: the recorder sleeps
until then. Heads are written after the chunk has gone on, so a response's head may reach
the pipe before its request's; the number, taken before the chunk goes on, is what orders
them (forkedrelay.InOrder). Both pumps write heads into that one pipe; a write under
PIPE_BUF is atomic. The copy pipes start at 64 KiB and grow to 1 MiB the first time they
are full (a pipe holds 256 pages then, however full each is): with the overflow, a 1 MiB
message crosses without the slow path below while the recorder sleeps (it records between
messages).

The channel never holds back a byte: its writes do not wait. When the recorder falls
behind and the pipes are full, the duplicate is read into memory instead and goes to a
backlog that a thread of the child writes out, waiting as long as it must; while the
backlog has anything, every copy joins it, so the order holds. An fd that splice does not
take (a file opened for appending, some devices) is read and written instead, its copies
written from memory.

The child keeps only the fds it pumps, its pipes, a control pipe, a status pipe and
stderr; it ignores SIGINT, SIGTERM and SIGHUP (the supervisor decides its lifetime) and
ends when both directions have reached EOF and their copies are out, or when the control
pipe closes (the supervisor is done with it, or died). The supervisor keeps it out of the
family (never observed, a survivor or reaped: `Supervisor.add_helper`) and reaps it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import itertools
import os
import signal
import stat
import struct
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import NoReturn

from mcpshim.base import fdio
from mcpshim.proc.procinfo import LINUX
from mcpshim.relay import pipeio
from mcpshim.relay.core import C2S, S2C, close_end, relay_pipe
from mcpshim.relay.pidmark import PidMark

__all__ = ["DIRECTIONS", "EOF", "HEAD", "MORE", "OVERFLOW", "available", "keep_only", "pump_main"]

DIRECTIONS = (C2S, S2C)
# direction index | flags, copy pipe, number, time read, length, the pid counter (PidMark)
HEAD = struct.Struct("<BBQdIi")
OVERFLOW = len(DIRECTIONS)  # the copy pipe both directions fall back on when theirs is full
EOF = 0x80  # the direction ended; the payload is why writing stopped, if it did
MORE = 0x40  # the chunk goes on in the next head of the same number (it filled a pipe)
_READ = 1 << 20
# A chunk of _LARGE_CHUNK bytes or more (its writer filled half a pipe) is part of a large
# message. Pipes grow only in a session that carries large messages: every pipe page counts
# against the user's pipe-user-pages-soft (64 MiB by default), past which each new pipe of
# that user, in any program, gets two pages. A session of small messages keeps the default
# pipes, under 1 MiB in all; the first large chunk makes the pipes to and from both peers
# and the probe _LARGE_PIPE, and the first copy the channel cannot take makes its pipes
# _LARGE_COPY: about 6.3 MiB. Through a real SDK client and server, pipes of 64 KiB cost
# 0.6 ms more on a 7 ms call at 256 KiB than pipes of 256 KiB; 512 KiB looked 0.2-0.5 ms
# better again.
_LARGE_CHUNK = 32 << 10
_LARGE_PIPE = 512 << 10
_LARGE_COPY = 1 << 20
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
    """The copies to the recorder: heads in one pipe, each direction's bytes in another.
    A pump's calls never wait; what does not fit now goes to the backlog (see the module
    docstring)."""

    def __init__(self, heads: int, data: Sequence[int]) -> None:
        self._heads, self._data = heads, tuple(data)
        for fd in (heads, *data):
            os.set_blocking(fd, False)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._backlog: deque[tuple[int, bytes, bytes]] = deque()  # (fd, bytes, head)
        self._numbers = itertools.count()
        self._grown = False
        self.gone = False  # the recorder stopped reading for good: copies are dropped
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
                        _grow(fd, _LARGE_COPY)
                    n = self._splice_parts(index, seq, t, probe, n, mark)
            if not n:
                return
            data = fdio.read_exactly(probe, n)  # the probe is left empty, whatever comes
            if not self.gone:
                self._later(self._data[index], data, HEAD.pack(index, index, seq, t, n, mark))

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
                fdio.write_all(fd, data, self._progressed)
                fdio.write_all(self._heads, head, self._progressed)
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
    """One direction: src -> dst, each chunk duplicated into a probe pipe by the call that
    waits for it, passed on, then moved from the probe into the channel. A source that is
    not a pipe is spliced into a pipe of our own first (tee takes pipes only). With `rings`,
    the bell gets a byte after each chunk is passed on."""

    def __init__(
        self, src: int, dst: int, index: int, channel: _Channel, bell: int, rings: bool
    ) -> None:
        self.src, self.dst, self.index, self.channel = src, dst, index, channel
        self.bell, self.rings = bell, rings
        self.splice_in = self.splice_out = pipeio.SPLICE_OK
        self.mid_r, self.mid_w = (-1, -1) if _is_pipe(src) else relay_pipe()
        self.probe_r, self.probe_w = relay_pipe()  # blocking, and always empty
        self.marks = PidMark()
        self.grown = False
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
        why = self.broken.encode()  # why writing stopped, if it did
        self.channel.write(self.index | EOF, self.channel.number(), time.time(), why)

    def _step(self) -> bool:
        if not self.splice_in:
            data = fdio.read_some(self.src, _READ)
            if not data:
                return False
            seq, t, mark = self.channel.number(), time.time(), self.marks.read()
            try:
                self._write(data)
            finally:
                self.channel.write(self.index, seq, t, data, mark)
            self._ring()
            return True
        if self.mid_r < 0:
            return self._pass(self.src) > 0
        try:
            n = pipeio.splice_some(self.src, self.mid_w, _READ)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            self.splice_in = False  # a source splice does not take: read it
            return True
        if not n:
            return False
        while n > 0:
            n -= self._pass(self.mid_r)  # our own pipe, holding n bytes: never 0 here
        return True

    def _pass(self, pipe: int) -> int:
        """Wait for bytes in `pipe`, then copy and pass them on: how many (0: it ended).
        The wait is the tee into the probe, so the bytes are duplicated as the call that
        waited returns and go on at once; what remains (the channel, the bell) comes after."""
        k = pipeio.tee_wait(pipe, self.probe_w, _READ)
        if not k:
            return 0
        # The pid counter before a request goes on (every fork it causes comes later) and
        # as a response has come (every fork before it came earlier): about 1 us.
        seq, t, mark = self.channel.number(), time.time(), self.marks.read()
        try:
            self._forward(pipe, k)
        finally:
            self.channel.copy(self.index, seq, t, self.probe_r, k, mark)
        self._ring()
        if k >= _LARGE_CHUNK and not self.grown:
            self.grown = True  # large messages: pipes that take one in a single turn
            for fd in (self.src, self.dst, self.probe_w, self.mid_w):
                _grow(fd, _LARGE_PIPE)
        return k

    def _forward(self, pipe: int, k: int) -> None:
        if self.broken:
            fdio.read_exactly(pipe, k)  # nobody reads: drop it, keep draining
        elif not self.splice_out:
            self._write(fdio.read_exactly(pipe, k))
        else:
            moved, err = pipeio.splice_all(pipe, self.dst, k)
            if err is not None:
                rest = fdio.read_exactly(pipe, k - moved)
                if err.errno == errno.EINVAL:
                    self.splice_out = False  # a destination splice does not take: write
                    self._write(rest)
                else:
                    self._stop(err)

    def _ring(self) -> None:
        if self.rings:
            with contextlib.suppress(OSError):  # full: rung already; closed: nobody listens
                os.write(self.bell, b"\0")

    def _write(self, data: bytes) -> None:
        if not self.broken:
            try:
                fdio.write_all(self.dst, data)
            except OSError as exc:
                self._stop(exc)

    def _stop(self, exc: OSError) -> None:
        # The reader is gone: keep draining so the writer never blocks on us.
        self.broken = exc.strerror or str(exc)
        close_end(self.dst)


def _grow(fd: int, size: int) -> None:
    """Make pipe `fd` hold `size` bytes, where it is a pipe and the user's limit allows."""
    if fd >= 0:
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)  # type: ignore[attr-defined, unused-ignore]


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

    # Only the server's output rings: the recorder sleeps through the client's requests,
    # large ones too. Waking it as the server starts work cost 0.1 ms a call, and through a
    # real SDK client and server, recording a large request while the server parsed it made
    # 256 KiB calls 0.1 ms and 1 MiB calls 0.2-0.5 ms slower than recording it with the
    # response.
    workers = [
        _Pump(src, dst, index, channel, bell, DIRECTIONS[index] == S2C)
        for index, (src, dst) in enumerate(pumps)
    ]
    # Named once every fd it will hold is open, before any thread (threads take the name
    # they are started under): a process named mcpshim-relay is one set up.
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
        comm.write("mcpshim-relay")
    channel.start()
    for worker in workers:
        threading.Thread(target=pump, args=(worker,), daemon=True).start()
    threading.Thread(target=control, daemon=True).start()
    over.wait()
    channel.flush(closed, _FLUSH_S)
    os._exit(0)
