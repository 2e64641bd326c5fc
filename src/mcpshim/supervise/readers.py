"""The supervisor loop's readers: the fds it waits on, each with its callback.

A reader may pause for a while (`pause`): the trace FIFO, which strace fills an exec's
line at a time in several pieces, is read in a few large reads instead of a wakeup per
piece.
"""

from __future__ import annotations

import contextlib
import selectors
import time
from collections.abc import Callable

__all__ = ["Readers"]

Callback = Callable[[int], None]


class Readers:
    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()
        self._paused: dict[int, tuple[float, Callback]] = {}  # fd -> (resume at, callback)

    def add(self, fd: int, callback: Callback) -> None:
        self._sel.register(fd, selectors.EVENT_READ, callback)

    def remove(self, fd: int) -> None:
        self._paused.pop(fd, None)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(fd)

    def pause(self, fd: int, seconds: float) -> None:
        """Stop watching fd for `seconds`, then watch it again."""
        key = self._sel.get_map().get(fd)
        if key is not None:
            self._sel.unregister(fd)
            self._paused[fd] = (time.monotonic() + seconds, key.data)

    def wait(self, until: float) -> None:
        """Call the readers that are ready, waiting at most until `until` (monotonic) or the
        first paused reader's time to resume."""
        now = time.monotonic()
        for fd, (when, callback) in list(self._paused.items()):
            if when <= now:
                del self._paused[fd]
                self._sel.register(fd, selectors.EVENT_READ, callback)
        wake = min([until, *(when for when, _cb in self._paused.values())])
        for key, _ in self._sel.select(max(0.0, wake - now)):
            key.data(key.fd)
