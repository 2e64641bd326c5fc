"""The relay in threads of the supervisor (`mcpshim run --mcp` where the pump child of
relay.child cannot run: not Linux, or fork failed; and the base of relay.gate's).

Two pump threads move bytes (client -> server, server -> client) with blocking read() and
write() and nothing else on that path. Each pump first drops a reference to the chunk (and
the time it arrived) into one shared queue, so a request is queued before the response it
causes; a third thread feeds the copies to a Transcriber (relay.core). What waits in the
queue is bounded (COPY_LIMIT): copies past it are dropped, and the drop is recorded.

A reader that goes away is passed on: the pump stops and closes its source, so the writer
gets EPIPE (or SIGPIPE) as it would with no relay between them.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time

from mcpshim.base import fdio
from mcpshim.relay.core import (
    C2S,
    COPY_LIMIT,
    S2C,
    Dropped,
    Recorder,
    Transcriber,
    close_end,
    dropped_reason,
)
from mcpshim.relay.pidmark import PidMark

__all__ = ["Relay"]

_READ = 1 << 20
# direction, time read, the copy (a Dropped: copies dropped there; None: the end), the pid
# counter as it was passed on (relay.pidmark)
_Item = tuple[str, float, bytes | Dropped | None, int]
_STOP = "stop"


class Relay:
    """Two pumps and a recorder thread; see the module docstring."""

    def __init__(self, recorder: Recorder, limit: int = COPY_LIMIT) -> None:
        self.recorder = recorder
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._threads: dict[str, threading.Thread] = {}
        self.bytes = {C2S: 0, S2C: 0}
        self.broken: dict[str, str] = {}
        self._limit = limit
        self._lock = threading.Lock()
        self._client_out = -1
        self._held = 0  # bytes queued for the recorder
        self._gaps: dict[str, tuple[float, Dropped]] = {}  # direction -> copies dropped
        self._out = threading.Lock()  # the client's stdout: the server's bytes, or ours
        self._line_end = True  # the server's output so far ends a line
        self._said = b""  # our lines waiting for the end of the server's
        self._out_closed = False

    def start(self, client_in: int, server_in: int, server_out: int, client_out: int) -> None:
        self._client_out = client_out
        pumps = {C2S: (client_in, server_in), S2C: (server_out, client_out)}
        for direction, (src, dst) in pumps.items():
            th = threading.Thread(
                target=self._pump, args=(src, dst, direction), name=f"mcp {direction}", daemon=True
            )
            self._threads[direction] = th
        self._threads["recorder"] = threading.Thread(
            target=self._record, name="mcp recorder", daemon=True
        )
        for th in self._threads.values():
            th.start()

    def _pump(self, src: int, dst: int, direction: str) -> None:
        marks = PidMark()
        while True:
            try:
                data = os.read(src, _READ)
            except OSError:
                data = b""
            if not data:
                break
            # Queue the copy (a reference, no work) before passing the bytes on: then a
            # request is always queued before the response it causes, whatever the
            # threads' scheduling. Parsing happens later, on the recorder thread.
            self._copy(direction, time.time(), data, marks.read())
            self.bytes[direction] += len(data)
            try:
                if direction == S2C:
                    with self._out:
                        fdio.write_all(dst, data)
                        self._line_end = data.endswith(b"\n")
                        if self._said and self._line_end:
                            fdio.write_all(dst, self._said)
                            self._said = b""
                else:
                    fdio.write_all(dst, data)
            except OSError as exc:
                # The reader is gone: pass that on, as a direct pipe would (the writer
                # gets EPIPE), rather than drain a writer that may never stop.
                self.broken[direction] = exc.strerror or str(exc)
                break
        close_end(src)
        if direction == S2C:
            with self._out:
                if self._said and direction not in self.broken:
                    cut = b"" if self._line_end else b"\n"  # ends what was cut short
                    with contextlib.suppress(OSError):
                        fdio.write_all(dst, cut + self._said)
                self._said, self._out_closed = b"", True
        close_end(dst)
        self._copy(direction, time.time(), None)

    def say(self, line: bytes) -> None:
        """A line of mcpshim's own to the client (relay.core.Relaying.say)."""
        with self._out:
            if S2C in self.broken or self._out_closed:
                return
            if not self._line_end:
                self._said += line  # after the server's line: the pump writes it
                return
            with contextlib.suppress(OSError):
                fdio.write_all(self._client_out, line)

    @property
    def held(self) -> int:
        """Bytes of copies waiting for the recorder."""
        return self._held

    def _copy(self, direction: str, t: float, data: bytes | None, mark: int = -1) -> None:
        """Queue a copy for the recorder; while what waits for it is past the limit (down
        to half of it), count the copy as dropped instead: the drop is queued in its place
        in the stream when copies flow again, or at the end."""
        with self._lock:
            gap = self._gaps.get(direction)
            if data is not None:
                if gap is None and self._held + len(data) > self._limit:
                    gap = self._gaps[direction] = (t, Dropped())
                if gap is not None and self._held + len(data) > self._limit // 2:
                    gap[1].add(data)
                    return
                self._held += len(data)
            if gap is not None:
                del self._gaps[direction]
                self._queue.put((direction, gap[0], gap[1], -1))
            self._queue.put((direction, t, data, mark))

    def _record(self) -> None:
        scribe = Transcriber(self.recorder)
        while not scribe.done:
            direction, t, data, mark = self._queue.get()
            if direction == _STOP:
                break
            if isinstance(data, Dropped):
                scribe.dropped(direction, t, data, dropped_reason(self._limit))
                continue
            if data is not None:
                with self._lock:
                    self._held -= len(data)
            scribe.feed(direction, t, data, mark)

    def server_done(self, timeout: float) -> bool:
        """Wait for the server's output to end; True when it did within `timeout`."""
        th = self._threads.get(S2C)
        if th is not None:
            th.join(timeout)
            return not th.is_alive()
        return True

    def finish(self, timeout: float = 5.0) -> None:
        """Record everything relayed so far, then stop recording (the relay goes on)."""
        th = self._threads.get("recorder")
        if th is not None:
            self._queue.put((_STOP, time.time(), None, -1))
            th.join(timeout)
