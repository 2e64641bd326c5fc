"""The kernel's pid counter, as the relay reads it when it passes a message on."""

from __future__ import annotations

import os

__all__ = ["PidMark"]


class PidMark:
    """The kernel's last allocated pid (/proc/sys/kernel/ns_last_pid), read with one pread
    on a descriptor opened once: taken as a request is passed to the server and as its
    response comes back, it orders forks exactly where clock ticks (10 ms) cannot. -1 where
    it cannot be read (no procfs)."""

    _PATH = "/proc/sys/kernel/ns_last_pid"

    def __init__(self) -> None:
        self._fd = -2

    def read(self) -> int:
        if self._fd == -2:
            try:
                self._fd = os.open(self._PATH, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._fd = -1
        if self._fd < 0:
            return -1
        try:
            return int(os.pread(self._fd, 24, 0))
        except (OSError, ValueError):
            return -1
