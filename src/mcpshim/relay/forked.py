"""`mcpshim run --mcp` on Linux: the relay as two processes of mcpshim's own.

The pump child (relay.child) moves the bytes; a recorder child reads their copies, cuts
them into messages and writes the records: as batch work at nice 10 (`_behind`), between
messages rather than during them (`_Batches`). Neither shares an interpreter lock with the
supervisor or with each other. Measured through a real SDK client and server on two cores
(benchmarks/relay_sdk.py), recording in the supervisor's own threads at nice 10 added
0.13-0.26 ms to a 1 ms tool call. In this child, in batches, woken by the bell rather than
by every request, the whole relay adds 0.18-0.25 ms to a 2.3-3.0 ms call, of which a bare
splice relay that records nothing takes 0.05-0.15 ms. Of the rest, about 0.02 ms is
copying before passing on (tee, then splice) and most is filing the copy and ringing the
bell, which share the two cores with the client as it wakes. On a busy machine
recording lags, which costs memory in the pump child's backlog, up to a limit past which
copies are dropped and the drop recorded (relay.channel): every record keeps the time its
bytes were read. It is a child of its own rather than a thread of
the supervisor so that its work never holds the interpreter lock the supervisor's signal
forwarding needs.

Both are children of the supervisor, forked before the server starts and any thread does:
`helpers` lists them for `Supervisor.add_helper` (never observed, a survivor or reaped in
the log). `start` returns once the recorder has closed what it inherited, so no client or
server waits on an end only the recorder still holds. The supervisor keeps two fds: a
control pipe whose closing ends the pump child, and a status pipe on which the pump child
reports each direction's end.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import io
import os
import select
import signal
import struct
import sys
import termios
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from mcpshim.base import fdio
from mcpshim.proc.procinfo import cpu_seconds
from mcpshim.relay.channel import (
    DIRECTIONS,
    EOF,
    HEAD,
    LOST,
    MORE,
    OVERFLOW,
    REPORT,
)
from mcpshim.relay.child import FLUSH_S, LOSS_REPORT, SAID, SAY, keep_only, pump_main
from mcpshim.relay.core import (
    COPY_LIMIT,
    S2C,
    Recorder,
    Transcriber,
    close_end,
    dropped_reason,
    relay_pipe,
)
from mcpshim.relay.loss import unpack_entries, unpack_loss

__all__ = ["RECORDER_LIMIT_S", "TERM_GRACE_S", "ForkedRelay"]

_READ = 1 << 20
_IGNORED = (signal.SIGINT, signal.SIGHUP)
TERM_GRACE_S = 5  # after SIGTERM: how long the recorder may go on writing
#: after the session: how long the recorder may go on at most, however busy it is
RECORDER_LIMIT_S = 120.0
_ABANDONED = (
    "the recorder stopped or was stuck before these copies reached it: they were not "
    "recorded (the bytes themselves were relayed unchanged)"
)


_NICE = 10


def _behind() -> None:
    """Behind the client, the server and the pumps, never starved. SCHED_BATCH: its
    wakeups never preempt a running process; nice 10: about a tenth of what a nice-0
    process gets when they compete. The idle class was no faster through a real SDK client
    and server once recording waits for quiet (below), and on a machine kept busy it
    recorded almost nothing, with no way back: an unprivileged process cannot leave it."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))  # type: ignore[attr-defined, unused-ignore]
    with contextlib.suppress(OSError):
        os.nice(_NICE)


# With no bell, look for copies (a request still unanswered) after _IDLE_S, then twice as
# long each time nothing came, up to _IDLE_MAX_S: an idle session wakes once a second.
_IDLE_S = 0.1
_IDLE_MAX_S = 1.0
_SETTLE_S = 0.001  # read the copies once the channel has been quiet this long,
_BATCH_S = 0.1  # or once a batch has been growing this long,
_BATCH_BYTES = 2 * _READ  # or once the copy pipes (three, grown to 1 MiB) hold this much


def _unread(fd: int) -> int:
    buf = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return buf[0]


class _Batches(io.RawIOBase):
    """The heads pipe, read a batch at a time, between calls rather than during them.

    The recorder sleeps until the pump child rings the bell, which it does once it has
    passed on something of the server's (a response, after the client has it), or for a
    while (_IDLE_S, longer when idle); then, once the channel has been quiet for _SETTLE_S
    (within the limits above), it reads all that came. Woken by each request's copy
    instead, it took the other core just as the server needed it: through a real SDK
    client and server on two cores, 0.1 ms more per call. Reading each chunk as it came (a
    1 MiB message is sixteen 64 KiB chunks) made 256 KiB calls 0.4-0.5 ms slower, even in
    the idle scheduling class."""

    def __init__(self, heads: int, data: Sequence[int], bell: int) -> None:
        super().__init__()
        self._heads, self._data, self._bell = heads, data, bell
        os.set_blocking(bell, False)
        self._rung_off = False  # the bell's writer is gone: the pump child has ended

    def readable(self) -> bool:
        return True

    def _listen(self) -> None:
        wait = _IDLE_S
        while not self._rung_off and not _unread(self._heads):
            rung = fdio.wait_for(self._bell, select.POLLIN, wait)
            with contextlib.suppress(BlockingIOError):
                self._rung_off = not os.read(self._bell, 4096)
            wait = _IDLE_S if rung else min(2 * wait, _IDLE_MAX_S)

    def readinto(self, buf: Any) -> int:
        self._listen()
        deadline = time.monotonic() + _BATCH_S
        seen = -1
        while True:
            now = _unread(self._heads) + sum(_unread(fd) for fd in self._data)
            if now == seen or now >= _BATCH_BYTES or time.monotonic() >= deadline:
                break
            seen = now
            time.sleep(_SETTLE_S)
        return os.readv(self._heads, [buf])


# direction index, time read, bytes (None: the end), the pid counter as it was passed on
Part = tuple[int, float, bytes | None, int]
LOSS_PART = -1  # a Part that says copies were dropped; its bytes: the LOSS payload


class InOrder:
    """Copies back in the order their bytes were read. A pump writes a chunk's head after
    passing the chunk on, so two heads may reach the pipe in the other order; their numbers,
    taken before anything was passed on, hold the order of cause and effect (a response's
    number is after its request's). A chunk split over two pipes has one number and a head
    for each part, MORE on all but the last.

    A LOST head stands for copies the pump child dropped, numbers up to its own among them:
    what is held up to that number is due at once, the loss after it, and nothing up to it
    is waited for any more. A copy with such a number may still come (its pump took the
    number before the loss and gave the copy after); it is due as soon as it is whole: no
    copy of its direction can come before it."""

    def __init__(self) -> None:
        self._next = 0
        self._parts: dict[int, list[Part]] = {}
        self._whole: set[int] = set()

    def add(self, flags: int, seq: int, t: float, data: bytes, mark: int = -1) -> list[Part]:
        """One head's part; the parts now due, in order."""
        if flags & LOST:
            due = [part for s in sorted(self._parts) if s <= seq for part in self._parts.pop(s)]
            self._whole = {s for s in self._whole if s > seq}
            self._next = max(self._next, seq + 1)
            return [*due, (LOSS_PART, t, data, -1), *self._due()]
        end = bool(flags & EOF)
        part = (flags & ~(EOF | MORE), t, None if end else data, mark)
        self._parts.setdefault(seq, []).append(part)
        if flags & MORE:
            return []
        if seq < self._next:  # late, after a loss that covered its number
            return self._parts.pop(seq)
        self._whole.add(seq)
        return self._due()

    def _due(self) -> list[Part]:
        due: list[Part] = []
        while self._next in self._whole:
            self._whole.discard(self._next)
            due += self._parts.pop(self._next)
            self._next += 1
        return due

    def rest(self) -> list[Part]:
        """What is left at the end (a pump that died between number and head), in order."""
        due = [part for seq in sorted(self._parts) for part in self._parts[seq]]
        self._parts.clear()
        return due


def transcribe(recorder: Recorder, heads: int, data: Sequence[int], bell: int) -> None:
    """Read the copy channel until the pump child is gone, recording every message."""
    scribe = Transcriber(recorder)
    order = InOrder()
    with contextlib.ExitStack() as stack:
        data_r = [stack.enter_context(open(fd, "rb", buffering=_READ)) for fd in data]
        head_r = stack.enter_context(io.BufferedReader(_Batches(heads, data, bell), 1 << 16))
        while len(head := head_r.read(HEAD.size)) == HEAD.size:
            flags, pipe, seq, t, size, mark = HEAD.unpack(head)
            chunk = data_r[pipe].read(size) if size else b""
            if len(chunk) < size:
                break  # the pump child died mid-copy
            for index, when, part, pmark in order.add(flags, seq, t, chunk, mark):
                _feed(scribe, index, when, part, pmark)
        for index, when, part, pmark in order.rest():
            _feed(scribe, index, when, part, pmark)
        os.close(heads)


def _feed(scribe: Transcriber, index: int, when: float, part: bytes | None, mark: int) -> None:
    if index != LOSS_PART:
        scribe.feed(DIRECTIONS[index], when, part, mark)
        return
    replay_loss(scribe, when, part or b"")


def replay_loss(scribe: Transcriber, when: float, payload: bytes) -> None:
    """A loss mark's entries, replayed in the order of their numbers: the pump appends them
    as it handles each direction's chunks, so a request's line and the answer to it can be
    listed the other way round (the answer was then read with no call open, and dropped)."""
    limit, dropped = unpack_loss(payload)
    entries = [
        (DIRECTIONS[e.index], e.at[1], e.dropped if e.dropped is not None else bytes(e.data or b""),
         e.at[2])
        for e in sorted(unpack_entries(payload), key=lambda e: e.at[0])
    ]  # fmt: skip
    scribe.lost(when, dict(zip(DIRECTIONS, dropped, strict=True)), entries, dropped_reason(limit))


def _wind_up(signum: int, frame: Any) -> None:
    """SIGTERM: what the recorder has in hand may still be written for TERM_GRACE_S, then
    SIGALRM (its default action) ends it wherever it is, even inside a long C call."""
    signal.alarm(TERM_GRACE_S)


def _recorder_main(recorder: Recorder, fds: Sequence[int], ready: int) -> NoReturn:
    for sig in _IGNORED:
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _wind_up)  # the terminal's signals stay the supervisor's
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
    keep_only({2, ready, *fds})
    _behind()
    os.close(ready)  # what it inherited is closed: no peer waits on an end held here
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
        comm.write("mcpshim-record")  # named once set up: its fds, its place in the queue
    transcribe(recorder, fds[0], fds[1:-1], fds[-1])
    os._exit(0)


class ForkedRelay:
    """A relay (relay.core.Relaying) with the pumps and the recorder in children (module
    docstring)."""

    def __init__(self, recorder: Recorder, limit: int = COPY_LIMIT, lines: bool = False) -> None:
        self.recorder = recorder
        self.limit = limit  # of the copies waiting for the recorder (relay.channel)
        self.lines = lines  # the supervisor may say lines to the client (say)
        self.pid = 0  # the pump child
        self.recorder_pid = 0
        self.helpers: set[int] = set()
        self._ctl = self._status = -1
        self._ended: set[int] = set()
        self._said = bytearray()  # heard on the status pipe, not yet understood
        self._abandoned = b""  # the pump child's REPORT, if it had to make one
        self._heard_said = 0  # lines the pump child took (SAID), not yet waited for

    def start(self, client_in: int, server_in: int, server_out: int, client_out: int) -> None:
        """Fork both children and hand them their fds: the parent's 0/1 become /dev/null
        and the server's pipe ends close here, so only the pump child holds them."""
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
                pump_main(pumps, theirs[0], theirs[1:-1], theirs[-1], ctl_r, status_w,
                          self.limit, self.lines)  # fmt: skip
            finally:
                os._exit(70)
        self.pid = pid
        self.helpers.add(pid)
        for fd in (*theirs, ctl_r, status_w, server_in, server_out, client_in, client_out):
            close_end(fd)
        self._ctl, self._status = ctl_w, status_r
        ready_r, ready_w = os.pipe()
        try:
            rpid = os.fork()
        except OSError:
            rpid = -1  # nobody records; the pumps drop the copies once the pipes close
        if rpid == 0:  # pragma: no cover - the child; it ends in os._exit
            try:
                self.helpers.add(os.getpid())
                _recorder_main(self.recorder, ours, ready_w)
            finally:
                os._exit(70)
        for fd in (*ours, ready_w):
            os.close(fd)
        if rpid > 0:
            self.recorder_pid = rpid
            self.helpers.add(rpid)
            with contextlib.suppress(OSError):
                os.read(ready_r, 1)  # EOF once the recorder let go of what it inherited
        with contextlib.suppress(OSError):  # whose progress to judge (0: nobody records)
            os.write(self._ctl, max(rpid, 0).to_bytes(4, "little"))
        os.close(ready_r)

    def say(self, line: bytes, timeout: float = 1.0) -> None:
        """A line of mcpshim's own to the client, between the server's (the pump child
        writes it: relay.child SAY); returns once the child has taken it."""
        if not self.lines or self._ctl < 0:
            return
        try:
            os.write(self._ctl, SAY + len(line).to_bytes(4, "little") + line)
        except OSError:
            return
        deadline = time.monotonic() + timeout
        while not self._heard_said:
            left = deadline - time.monotonic()
            if left <= 0 or not fdio.wait_for(self._status, select.POLLIN, left):
                return
            if not self._hear():
                return
        self._heard_said -= 1

    def server_done(self, timeout: float) -> bool:
        """Wait for the server's output to end; True when it did within `timeout`."""
        deadline = time.monotonic() + timeout
        s2c = DIRECTIONS.index(S2C)
        while s2c not in self._ended:
            left = deadline - time.monotonic()
            if left <= 0 or not fdio.wait_for(self._status, select.POLLIN, left):
                return False
            if not self._hear():
                return True  # the pump child is gone: nothing more will come
        return True

    def _hear(self) -> bool:
        """Read the status pipe once (False at its end): a byte per direction as it ends,
        and at the end, what the pump child could not give the recorder (LOSS_REPORT)."""
        got = os.read(self._status, 256)
        self._said += got
        while self._said:
            if self._said[0] == SAID:
                self._heard_said += 1
                del self._said[0]
            elif self._said[0] != LOSS_REPORT:
                self._ended.add(self._said.pop(0))
            elif len(self._said) > REPORT.size:
                self._abandoned = bytes(self._said[1 : 1 + REPORT.size])
                del self._said[: 1 + REPORT.size]
            else:
                break
        return bool(got)

    def _record_abandoned(self, wait: float) -> None:
        """Hear the pump child out (it ends once its copies are out or given up) and
        record what never reached the recorder, so no loss goes unsaid."""
        deadline = time.monotonic() + wait
        with contextlib.suppress(OSError):
            while fdio.wait_for(self._status, select.POLLIN, deadline - time.monotonic()):
                if not self._hear():
                    break
        if not self._abandoned:
            return
        (t,) = struct.unpack_from("<d", self._abandoned)
        _limit, dropped = unpack_loss(self._abandoned[8:])
        for direction, lost in zip(DIRECTIONS, dropped, strict=True):
            if lost.size:
                self.recorder.unrecorded(direction, t, lost, _ABANDONED)

    def finish(self, timeout: float = 10.0, limit: float = RECORDER_LIMIT_S) -> None:
        """End the pump child (it sends its last copies first) and wait until the recorder
        has written every record: as long as it is working (its CPU time grows), so a
        busy machine loses no record, for `limit` seconds at most; once it has done nothing
        for `timeout` seconds (stopped, or blocked), or past `limit`, it is ended (SIGKILL):
        no process `run` started outlives it. Then record what the pump child reports it
        could not give the recorder (it went away or got stuck)."""
        with contextlib.suppress(OSError):
            os.close(self._ctl)
        self._wait_for_recorder(timeout, limit)
        self._record_abandoned(FLUSH_S + 5.0)

    def _wait_for_recorder(self, timeout: float, limit: float) -> None:
        if self.recorder_pid <= 0:
            return
        worked, since = cpu_seconds(self.recorder_pid), time.monotonic()
        end = since + limit
        while True:
            try:
                done, _ = os.waitpid(self.recorder_pid, os.WNOHANG)
            except ChildProcessError:
                return  # reaped by the supervisor's loop: it ended
            if done:
                return
            now = time.monotonic()
            if now >= end:
                self._end_recorder(f"was still busy after {limit:.0f} s")
                return
            if now - since >= timeout:
                used = cpu_seconds(self.recorder_pid)
                if used is None or used == worked:
                    self._end_recorder(f"did nothing for {timeout:.0f} s")
                    return
                worked, since = used, now
            time.sleep(0.005)

    def _end_recorder(self, why: str) -> None:
        print(
            f"mcpshim: warning: the recorder (pid {self.recorder_pid}) {why} and was ended; "
            "records it did not write are missing from the log",
            file=sys.stderr,
        )
        with contextlib.suppress(OSError):
            os.kill(self.recorder_pid, signal.SIGKILL)  # our unreaped child: never reused
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.recorder_pid, 0)

    def reap(self) -> int:
        """Wait for the pump child (after finish); its exit code, or -1 if reaped already."""
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return -1
        return os.waitstatus_to_exitcode(status)
