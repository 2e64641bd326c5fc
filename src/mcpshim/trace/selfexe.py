"""Which file an exec of `/proc/self/exe` (or `/proc/PID/exe`) ran, named from the trace.

Chromium's network service, Electron apps and many others re-run their own binary by
executing `/proc/self/exe`. That path names a different file in every process that
resolves it: read by mcpshim (approve hashing it, `--contain` allowing it) it is mcpshim's
own interpreter. So it is resolved here, in the traced process's terms: the executable of
the process that called execve at that moment, that is its previous image (the file its
last successful exec ran, or for a script the interpreter the kernel ran it with), or, for
a process that never exec'd, its parent's when it was forked. `/proc/PID/exe` of another
traced process is that process's image at that time. What the trace cannot tell (the
root's image before its first exec, a process whose fork was not seen) stays unknown:
None, and no reader resolves the path in its own process instead.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterator

from mcpshim.trace.strace import ExecAttempt, Trace

__all__ = ["Images", "is_exe_link"]

_LINK = re.compile(rb"/proc/(self|thread-self|[0-9]+)(?:/task/([0-9]+))?/exe")
_BINPRM_BUF = 256  # the kernel reads this much of a file for its #! line
_NESTING = 4  # binfmt_script nests this deep


def is_exe_link(filename: bytes) -> bool:
    """Whether `filename` is a process's `exe` link in /proc (whose target depends on who
    reads it)."""
    return _LINK.fullmatch(os.path.normpath(filename)) is not None


def _runs(path: bytes) -> bytes:
    """The file the kernel ends up running for `path`: a `#!` script's interpreter (nested
    as the kernel nests them), else the file itself, as /proc shows it (real path)."""
    for _ in range(_NESTING):
        try:
            with open(path, "rb") as fh:
                head = fh.read(_BINPRM_BUF)
        except OSError:
            break
        if not head.startswith(b"#!"):
            break
        words = head[2:].split(b"\n", 1)[0].strip(b" \t\r").split()
        if not words or not words[0].startswith(b"/"):
            break
        path = words[0]
    return os.path.realpath(path)


class Images:
    """Each traced process's executable over time, for resolving exe links."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._times: dict[int, list[float]] = {}
        self._files: dict[int, list[bytes | None]] = {}
        self._tgid: dict[int, int] = {}
        for e in trace.execs:
            self._tgid.setdefault(e.tid, e.pid)
        self._resolved: dict[int, bytes | None] = {}  # id(exec) -> what it ran
        for e in trace.execs:
            if e.result == "ok":
                ran = self.ran(e)
                if ran is not None and not ran.startswith(b"/"):  # relative to its cwd
                    ran = os.path.join(e.cwd, ran) if e.cwd is not None else None
                self._times.setdefault(e.pid, []).append(e.time)
                self._files.setdefault(e.pid, []).append(ran)

    def ran(self, e: ExecAttempt) -> bytes | None:
        """The file exec attempt `e` runs (ran, or tried to): its path, or for an exe link
        the file the link named in the calling process; None when the trace cannot say."""
        key = id(e)
        if key not in self._resolved:
            if is_exe_link(e.filename):
                self._resolved[key] = self.resolve(e.filename, e.pid, e.tid, e.time)
            else:
                self._resolved[key] = e.filename
        return self._resolved[key]

    def resolve(self, link: bytes, pid: int, tid: int, t: float) -> bytes | None:
        """The file `link` (an exe link) named in process `pid` (thread `tid`) at time t."""
        m = _LINK.fullmatch(os.path.normpath(link))
        if m is None:
            return None
        who = m.group(1)
        if who in (b"self", b"thread-self"):
            target = pid
        else:
            n = int(who)
            target = pid if n == tid else self._tgid.get(n, n)
        return self.image_at(target, t)

    def image_at(self, pid: int, t: float) -> bytes | None:
        """The executable of process `pid` just before time t."""
        for _ in range(len(self.trace.processes) + 1):  # up the ancestry, never in a loop
            times = self._times.get(pid, [])
            i = bisect.bisect_left(times, t)
            if i > 0:
                image = self._files[pid][i - 1]
                return _runs(image) if image is not None else None
            proc = self.trace.processes.get(pid)
            if proc is None or proc.ppid is None or not proc.parent_known:
                return None  # the root before its first exec, or a fork not seen
            pid, t = proc.ppid, proc.time
        return None

    def links(self) -> Iterator[tuple[ExecAttempt, bytes | None]]:
        """Every exec attempt of an exe link, and the file it named."""
        for e in self.trace.execs:
            if is_exe_link(e.filename):
                yield e, self.ran(e)
