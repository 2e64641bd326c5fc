"""The relay's pumps in a process of their own (`mcpshim run --mcp` on Linux).

In the supervisor's process the pumps share the interpreter lock with the recorder (json
parsing, redaction) and the sampler, and a message waits for them: 1.8 ms at p95 for one
byte, several ms for 1 MiB. So the supervisor forks, before it starts the server, a child
that does nothing but move bytes: client stdin -> server stdin, server stdout -> client
stdout, with the thread Relay's semantics (a chunk is written on whole before anything else
happens to it; a peer that goes away is drained so the other side never blocks; EOF is
passed on; nothing is reordered or altered). Each chunk's copy, stamped with its direction
and the time it was read, is queued (a reference, no work) before the chunk is written,
and a third thread of the child writes the copies, framed, to a pipe the parent reads: a
slow parent grows that queue, it never holds back a byte. The parent feeds the copies to
the same recorder thread as the thread Relay, so the records are the same.

The child keeps only the fds it pumps, the copy pipe, a control pipe and stderr; it ignores
SIGINT, SIGTERM and SIGHUP (the supervisor decides its lifetime) and ends when both
directions have reached EOF and their copies are out, or when the control pipe closes (the
supervisor is done with it, or died). The supervisor keeps it out of the family (never
observed, a survivor or reaped: `Supervisor.add_helper`) and reaps it.
"""

from __future__ import annotations

import contextlib
import gc
import os
import queue
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import NoReturn

from mcpshim.mcprelay import C2S, S2C, Relay, close_end, relay_pipe
from mcpshim.procinfo import LINUX

__all__ = ["ForkedRelay", "available"]

_DIRECTIONS = (C2S, S2C)
_HEAD = struct.Struct("<BdI")  # direction index (| _EOF), time read, payload length
_EOF = 0x80  # the direction ended; the payload is why writing stopped, if it did
_READ = 1 << 20
_FLUSH_S = 5.0  # after the control pipe closes: how long copies may still go out
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_Copy = tuple[int, float, bytes | None, str]


def available() -> bool:
    """The forked relay needs fork() and /proc (to close what it inherits): Linux."""
    return LINUX and hasattr(os, "fork")


def _write_all(fd: int, parts: Sequence[bytes]) -> None:
    views = [memoryview(p) for p in parts if p]
    while views:
        n = os.writev(fd, views)
        while views and n >= len(views[0]):
            n -= len(views[0])
            views.pop(0)
        if views and n:
            views[0] = views[0][n:]


# ---- the child -----------------------------------------------------------------------------


def _keep_only(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _pump(src: int, dst: int, index: int, copies: queue.SimpleQueue[_Copy]) -> None:
    put = copies.put
    broken = ""
    while True:
        try:
            data = os.read(src, _READ)
        except OSError:
            data = b""
        if not data:
            break
        put((index, time.time(), data, ""))  # the copy first: a request precedes its response
        if not broken:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(dst, view) :]
            except OSError as exc:
                # The reader is gone: keep draining so the writer never blocks on us.
                broken = exc.strerror or str(exc)
                close_end(dst)
    if not broken:
        close_end(dst)
    put((index, time.time(), None, broken))


def _send_copies(copy_w: int, copies: queue.SimpleQueue[_Copy]) -> NoReturn:
    """Write every copy to the parent, in order; exit once both directions have ended."""
    ended = 0
    sending = True
    while True:
        index, t, data, broken = copies.get()
        if index < 0:
            break  # the control pipe closed: what came before is out
        if data is None:
            ended += 1
            data, index = broken.encode(), index | _EOF
        if sending:
            try:
                _write_all(copy_w, (_HEAD.pack(index, t, len(data)), data))
            except OSError:
                sending = False  # the parent is gone; the control pipe will say so too
        if ended == len(_DIRECTIONS):
            break
    os._exit(0)


def _child(pumps: Sequence[tuple[int, int]], copy_w: int, ctl_r: int) -> NoReturn:
    for sig in _FORWARDED:
        signal.signal(sig, signal.SIG_IGN)
    gc.disable()  # nothing here makes cycles; no collector pause on the forwarding path
    _keep_only({2, copy_w, ctl_r, *(fd for pair in pumps for fd in pair)})
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
        comm.write("mcpshim-relay")
    copies: queue.SimpleQueue[_Copy] = queue.SimpleQueue()
    for index, (src, dst) in enumerate(pumps):
        threading.Thread(target=_pump, args=(src, dst, index, copies), daemon=True).start()
    sender = threading.Thread(target=_send_copies, args=(copy_w, copies), daemon=True)
    sender.start()
    with contextlib.suppress(OSError):
        while os.read(ctl_r, 64):
            pass
    copies.put((-1, 0.0, None, ""))
    sender.join(_FLUSH_S)
    os._exit(0)


# ---- the parent ----------------------------------------------------------------------------

_NICE = 10


def _in_background(fn: Callable[..., None]) -> Callable[..., None]:
    """Run fn on a thread the scheduler puts after the pumps, the client and the server:
    parsing a 1 MiB copy takes milliseconds of CPU that the forwarding path would otherwise
    share (Linux niceness is per thread)."""

    def run(*args: object) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICE)
        fn(*args)

    return run


class ForkedRelay(Relay):
    """The Relay interface, with the pumps in a forked child (see the module docstring)."""

    pid = 0

    def start(self, client_in: int, server_in: int, server_out: int, client_out: int) -> None:
        """Fork the pump child, then hand the four fds to it: the parent's 0/1 become
        /dev/null and the server's pipe ends close here, so only the child holds them."""
        copy_r, copy_w = relay_pipe()
        ctl_r, ctl_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError:
            for fd in (copy_r, copy_w, ctl_r, ctl_w):
                os.close(fd)
            raise  # nothing was handed over: the caller can fall back to threads
        if pid == 0:  # pragma: no cover - the child; it ends in os._exit
            try:
                _child(((client_in, server_in), (server_out, client_out)), copy_w, ctl_r)
            finally:
                os._exit(70)
        self.pid = pid
        self._ctl = ctl_w
        self._server_eof = threading.Event()
        for fd in (copy_w, ctl_r, server_in, server_out, client_in, client_out):
            close_end(fd)
        self._threads["copies"] = threading.Thread(
            target=_in_background(self._read_copies), args=(copy_r,), name="mcp copies", daemon=True
        )
        self._threads["recorder"] = threading.Thread(
            target=_in_background(self._record), name="mcp recorder", daemon=True
        )
        for th in self._threads.values():
            th.start()

    def _read_copies(self, copy_r: int) -> None:
        put = self._queue.put
        with open(copy_r, "rb", buffering=_READ) as pipe:
            while len(head := pipe.read(_HEAD.size)) == _HEAD.size:
                index, t, size = _HEAD.unpack(head)
                data = pipe.read(size) if size else b""
                direction = _DIRECTIONS[index & ~_EOF]
                if index & _EOF:
                    if data:
                        self.broken[direction] = data.decode(errors="replace")
                    put((direction, t, None))
                    if direction == S2C:
                        self._server_eof.set()
                else:
                    self.bytes[direction] += len(data)
                    put((direction, t, data))
        self._server_eof.set()  # the child is gone: nothing more will come

    def server_done(self, timeout: float) -> bool:
        """Wait for the server's output to end; True when it did within `timeout`."""
        return self._server_eof.wait(timeout)

    def finish(self, timeout: float = 5.0) -> None:
        """Let the child send what it has and end, record all of it, stop recording."""
        with contextlib.suppress(OSError):
            os.close(self._ctl)
        self._threads["copies"].join(timeout)
        super().finish(timeout)

    def reap(self) -> int:
        """Wait for the child (after finish); its exit code, or -1 if it was reaped already."""
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return -1
        return os.waitstatus_to_exitcode(status)
