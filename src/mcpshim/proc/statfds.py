"""The stat lines of a watched family, read through descriptors held open between ticks.

A sampler reads every member's /proc/PID/stat ten times a second. Opening, reading and
closing the file costs three system calls and a path lookup; a descriptor kept open is
read again with one `pread` at offset 0, which makes the kernel format the line anew; a
line equal to the last one read (a process that slept through the tick) is not parsed again.
The descriptor belongs to the process it was opened for, not to its number: once that
process is gone (reaped) the read fails, even if the pid is in use again, so a held
descriptor never reports a stranger. Linux only (the callers use psutil elsewhere).
"""

from __future__ import annotations

import os

from mcpshim.proc.procinfo import Stat, parse_stat

__all__ = ["LastPid", "StatFds"]


class StatFds:
    """Stat lines by pid, with at most `limit` descriptors held (the rest are opened and
    closed each time, as `read_stat` does), so a large family cannot exhaust the fd table."""

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self._fds: dict[int, int] = {}
        self._last: dict[int, tuple[bytes, Stat]] = {}

    def read(self, pid: int, keep: bool = True) -> Stat | None:
        """This tick's stat of pid; None when no such process exists."""
        fd = self._fds.get(pid)
        if fd is not None:
            st = self._pread(pid, fd)
            if st is not None:
                return st
            self.drop(pid)  # the process it was opened for is gone: maybe a new one has pid
        try:
            fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        st = self._pread(pid, fd)
        if st is not None and keep and len(self._fds) < self.limit:
            self._fds[pid] = fd
        else:
            os.close(fd)
        return st

    def _pread(self, pid: int, fd: int) -> Stat | None:
        try:
            data = os.pread(fd, 4096, 0)  # one read: a line is well under 1 KiB
        except OSError:
            return None
        last = self._last.get(pid)
        if last is not None and last[0] == data:
            return last[1]
        st = parse_stat(pid, data)
        if st is not None:
            self._last[pid] = (data, st)
        return st

    def drop(self, pid: int) -> None:
        self._last.pop(pid, None)
        fd = self._fds.pop(pid, None)
        if fd is not None:
            os.close(fd)

    def keep_only(self, pids: set[int]) -> None:
        """Close the descriptors of every pid not in pids (gone, or not ours to watch)."""
        for pid in [p for p in self._fds if p not in pids]:
            self.drop(pid)
        for pid in [p for p in self._last if p not in pids]:
            del self._last[pid]

    def close(self) -> None:
        self.keep_only(set())

    @property
    def held(self) -> int:
        return len(self._fds)


class LastPid:
    """The pid the kernel handed out last in this pid namespace (the last field of
    /proc/loadavg, read through a held descriptor): while it stays the same, no process was
    created, so a family can only have lost members or changed the ones it has."""

    def __init__(self) -> None:
        try:
            self._fd: int | None = os.open("/proc/loadavg", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._fd = None

    def read(self) -> int | None:
        if self._fd is None:
            return None
        try:
            return int(os.pread(self._fd, 256, 0).split()[-1])
        except (OSError, ValueError, IndexError):
            return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
