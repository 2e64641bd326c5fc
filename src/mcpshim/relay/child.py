"""The relay's pumps in a process of their own (`mcpshim run --mcp` on Linux).

In the supervisor's process the pumps share the interpreter lock with the recorder (json
parsing, redaction) and the sampler, and a message waits for them: 1.8 ms at p95 for one
byte, several ms for 1 MiB. So the supervisor forks, as it starts the server, a child
that does nothing but move bytes: client stdin -> server stdin, server stdout -> client
stdout, with the thread Relay's semantics (EOF is passed on, and so is a reader that goes
away: the pump stops and lets go of its source, so the writer gets EPIPE or SIGPIPE as it
would with no relay between them; nothing is reordered or altered).

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

The copies go to the recorder child through the copy channel (relay.channel), whose
writes never wait. An fd that splice does not take (a file opened for appending, some
devices) is read and written instead, its copies written from memory.

The child keeps only the fds it pumps, its pipes, a control pipe, a status pipe and
stderr; it ignores SIGINT, SIGTERM and SIGHUP (the supervisor decides its lifetime) and
ends when both directions have reached EOF and their copies are out, or when the control
pipe closes (the supervisor is done with it, or died). Its last copies wait for the
recorder as long as the recorder makes progress (takes copies, or works: its CPU time,
whose pid the supervisor sends on the control pipe); what a recorder that went away or
got stuck never got is reported on the status pipe, and the supervisor records it. The
supervisor keeps the child out of the family (never observed, a survivor or reaped:
`Supervisor.add_helper`) and reaps it.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import signal
import socket
import stat
import sys
import threading
import time
from collections.abc import Sequence
from typing import NoReturn

from mcpshim.base import fdio
from mcpshim.relay import pipeio
from mcpshim.relay.channel import DIRECTIONS, EOF, OVERFLOW, Channel
from mcpshim.relay.ends import COPY_LIMIT, S2C, close_end, relay_pipe
from mcpshim.relay.pidmark import PidMark

__all__ = [
    "FLUSH_S",
    "LOSS_REPORT",
    "SAID",
    "SAY",
    "Pumps",
    "available",
    "keep_only",
    "pump_main",
    "start_pumps",
]

_READ = 1 << 20
# A chunk of _LARGE_CHUNK bytes or more (its writer filled half a pipe) is part of a large
# message. Pipes grow only in a session that carries large messages: every pipe page counts
# against the user's pipe-user-pages-soft (64 MiB by default), past which each new pipe of
# that user, in any program, gets two pages. A session of small messages keeps the default
# pipes, under 1 MiB in all; the first large chunk makes the pipes to and from both peers
# and the probe _LARGE_PIPE, and the first copy the channel cannot take makes its pipes
# 1 MiB (relay.channel): about 6.3 MiB. Through a real SDK client and server, pipes of 64 KiB cost
# 0.6 ms more on a 7 ms call at 256 KiB than pipes of 256 KiB; 512 KiB looked 0.2-0.5 ms
# better again.
_LARGE_CHUNK = 32 << 10
_LARGE_PIPE = 512 << 10
FLUSH_S = 5.0  # after the control pipe closes: how long the recorder may make no progress
#: on the status pipe, after a direction's index as each ends: what was never recorded
LOSS_REPORT = 0xFF
#: on the status pipe: a line of the supervisor's (SAY on the control pipe) was taken
SAID = 0xFE
#: on the control pipe, after the recorder's pid: SAY, a 4-byte length, a line for the client
SAY = b"S"
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
LINUX = sys.platform.startswith("linux")


def available() -> bool:
    """The forked relay needs fork() and /proc (to close what it inherits): Linux."""
    return LINUX and hasattr(os, "fork")


class Pumps:
    """The pump child as its parent holds it: its pid, the control pipe whose closing ends
    it (and which carries the recorder's pid to it), the status pipe it reports on, and the
    read ends of the copy channel (heads, each direction's bytes, the overflow, the bell)
    that the recorder takes (relay.forked)."""

    def __init__(self, pid: int, ctl: int, status: int, copies: list[int]) -> None:
        self.pid, self.ctl, self.status, self.copies = pid, ctl, status, copies

    @property
    def bell(self) -> int:
        """Readable once the pump child has passed some of the server's output on."""
        return self.copies[-1]


def start_pumps(
    client_in: int,
    server_in: int,
    server_out: int,
    client_out: int,
    limit: int = COPY_LIMIT,
    lines: bool = False,
) -> Pumps:
    """Fork the pump child and hand it its fds: the parent's 0/1 become /dev/null and the
    server's pipe ends close here, so only the pump child holds them. Copies wait in the
    channel (and in the child's memory, up to `limit`) for a recorder to take them.
    `lines`: the supervisor may say lines to the client (pump_main)."""
    # heads (22 bytes a chunk part), each direction's bytes, the overflow, then the bell
    channel = [relay_pipe() for _ in range(OVERFLOW + 3)]  # they grow in the pump child
    ours, theirs = [r for r, _ in channel], [w for _, w in channel]
    ctl_r, ctl_w = os.pipe()
    status_r, status_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError:
        for fd in (*ours, *theirs, ctl_r, ctl_w, status_r, status_w):
            os.close(fd)
        raise  # nothing was handed over: the caller can fall back to threads
    if pid == 0:  # pragma: no cover - the child; it ends in os._exit
        try:
            pumps = ((client_in, server_in), (server_out, client_out))
            pump_main(pumps, theirs[0], theirs[1:-1], theirs[-1], ctl_r, status_w, limit, lines)
        finally:
            os._exit(70)
    for fd in (*theirs, ctl_r, status_w, server_in, server_out, client_in, client_out):
        close_end(fd)
    return Pumps(pid, ctl_w, status_r, ours)


# ---- the child -----------------------------------------------------------------------------


def keep_only(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


class _Pump:
    """One direction: src -> dst, each chunk duplicated into a probe pipe by the call that
    waits for it, passed on, then moved from the probe into the channel. A source that is
    not a pipe is spliced into a pipe of our own first (tee takes pipes only). With `rings`,
    the bell gets a byte after each chunk is passed on."""

    def __init__(
        self, src: int, dst: int, index: int, channel: Channel, bell: int, rings: bool,
        lines: bool = False,
    ) -> None:  # fmt: skip
        self.src, self.dst, self.index, self.channel = src, dst, index, channel
        self.bell, self.rings = bell, rings
        self.splice_in = self.splice_out = pipeio.SPLICE_OK
        # `lines`: the supervisor may have a line to say between the server's (say): the
        # bytes are read and written, so the pump knows where each of the server's lines ends
        self.lines = lines
        if lines:
            self.splice_in = False
        self.out = threading.Lock()
        self.line_end = True
        self.said = b""
        self.closed = False  # the destination is let go of: nothing more is written
        self.mid_r, self.mid_w = (-1, -1) if _is_pipe(src) else relay_pipe()
        self.probe_r, self.probe_w = relay_pipe()  # blocking, and always empty
        self.marks = PidMark()
        self.grown = False
        self.broken = ""

    def run(self) -> None:
        while not self.broken:
            try:
                more = self._step()
            except OSError:
                more = False  # the source failed: an end, as read() failing is
            if not more:
                break
        _hang_up(self.src)  # a reader gone is passed on: the writer gets EPIPE, as directly
        with self.out:
            if self.said and not self.broken:  # a newline ends what was cut short
                self._write((b"" if self.line_end else b"\n") + self.said)
            self.said, self.closed = b"", True
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
                with self.out:
                    self._write(data)
                    self.line_end = data.endswith(b"\n")
                    if self.said and self.line_end:
                        self._write(self.said)
                        self.said = b""
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
        while n > 0 and not self.broken:
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
                pipeio.grow(fd, _LARGE_PIPE)
        return k

    def _forward(self, pipe: int, k: int) -> None:
        if not self.splice_out:
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

    def say(self, line: bytes) -> None:
        """A line of the supervisor's for the client: now, between two of the server's
        lines, or once the server's line is done (or at its end)."""
        with self.out:
            if self.broken or self.closed:
                return
            if self.lines and not self.line_end:
                self.said += line
            else:
                self._write(line)

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
        # The reader is gone: this pump stops reading (run), and the writer learns it.
        self.broken = exc.strerror or str(exc)
        close_end(self.dst)


def _hang_up(src: int) -> None:
    """Let go of a source: a socket is shut for reading first (the client may hold one
    socket as both stdin and stdout: closing one fd would not reach it)."""
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.fstat(src).st_mode):
            with socket.socket(fileno=os.dup(src)) as sock:
                sock.shutdown(socket.SHUT_RD)
    close_end(src)


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
    limit: int = COPY_LIMIT,
    lines: bool = False,
) -> NoReturn:
    """The pump child's whole life: forward both ways until both end or `ctl_r` closes;
    one byte (the direction's index) to `status` as each direction ends; a byte to `bell`
    as the server's output is passed on. `lines`: the supervisor may say a line to the
    client (SAY on `ctl_r`, SAID on `status` once it is taken), between the server's."""
    for sig in _FORWARDED:
        signal.signal(sig, signal.SIG_IGN)
    # Forked with the server already running (supervise.launch), it inherits the session's
    # SIGCHLD handler and wakeup pipe: neither is its own.
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
    gc.disable()  # nothing here makes cycles; no collector pause on the forwarding path
    keep_only({2, heads, bell, ctl_r, status, *data, *(fd for pair in pumps for fd in pair)})
    os.set_blocking(bell, False)
    channel = Channel(heads, data, limit)
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

    said = bytearray()  # the supervisor's word on the control pipe: the recorder's pid
    lines_said = bytearray()  # then SAY frames: a line for the client each

    def control() -> None:
        with contextlib.suppress(OSError):
            while got := os.read(ctl_r, 4096):
                take = max(0, 4 - len(said))
                said.extend(got[:take])
                lines_said.extend(got[take:])
                while len(lines_said) >= 5 and lines_said[:1] == SAY:
                    n = int.from_bytes(lines_said[1:5], "little")
                    if len(lines_said) < 5 + n:
                        break
                    line = bytes(lines_said[5 : 5 + n])
                    del lines_said[: 5 + n]
                    for w in workers:
                        if DIRECTIONS[w.index] == S2C:
                            w.say(line)
                    with contextlib.suppress(OSError):
                        os.write(status, bytes([SAID]))
        closed.set()
        over.set()

    def working() -> float | None:
        """The recorder's CPU time so far (None: unknown, or it is gone)."""
        from mcpshim.proc.procinfo import cpu_seconds  # (not before the server's start)

        pid = int.from_bytes(said[:4], "little") if len(said) >= 4 else 0
        return cpu_seconds(pid) if pid else None

    # Only the server's output rings: the recorder sleeps through the client's requests,
    # large ones too. Waking it as the server starts work cost 0.1 ms a call, and through a
    # real SDK client and server, recording a large request while the server parsed it made
    # 256 KiB calls 0.1 ms and 1 MiB calls 0.2-0.5 ms slower than recording it with the
    # response.
    s2c = [DIRECTIONS[index] == S2C for index in range(len(pumps))]
    workers = [
        _Pump(src, dst, index, channel, bell, s2c[index], lines and s2c[index])
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
    channel.flush(closed, FLUSH_S, working)
    if report := channel.report():
        with contextlib.suppress(OSError):
            os.write(status, bytes([LOSS_REPORT]) + report)  # under PIPE_BUF: at once
    os._exit(0)
