"""Can strace trace here? The probe behind `mcpshim run --trace` and `--trace=auto`.

The probe runs the exact command line the session will use on `/bin/true` before the
server starts, so a missing strace, a yama ptrace_scope that forbids it or a container's
seccomp profile is found while there is still time to refuse (plain --trace: exit 2 with the
reason and the fix) or to fall back (--trace=auto, the default: shims plus sampling, and a
`trace-fallback` record that says why).

It runs on os, select and signal alone (subprocess, tempfile and shutil would take 15 ms
to load before the server starts): strace is spawned with its trace and its complaints
on two pipes of ours.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

from mcpshim.base.pathsearch import which
from mcpshim.errors import UsageError
from mcpshim.shim.targets import unsafe_reason
from mcpshim.trace.straceargs import strace_argv

__all__ = [
    "FIX",
    "Probe",
    "find_strace",
    "forbidden",
    "probe",
    "probing",
    "require_trace",
    "trace_unavailable",
]

FIX = "; or leave out --trace: the default (--trace=auto) falls back to shims plus sampling"


def find_strace(path: str | None) -> tuple[str | None, str]:
    """strace on PATH, refused when it sits where others can replace it."""
    found = which("strace", _search_path(path))
    if found is None:
        return None, (
            f"strace is not installed or not on PATH ({path or ''}); install it "
            "(Debian/Ubuntu: apt-get install strace; Fedora: dnf install strace)"
        )
    found = os.path.abspath(found)
    bad = unsafe_reason(found)
    if bad:
        return None, f"refusing {found}: {bad}; install strace in a root-owned directory"
    return found, ""


def _search_path(path: str | None) -> str:
    """What shutil.which searches when given `path`: it, else $PATH, else the system's."""
    if path is not None:
        return path
    if "PATH" in os.environ:
        return os.environ["PATH"]
    try:
        return os.confstr("CS_PATH") or os.defpath
    except (AttributeError, ValueError):
        return os.defpath


class Probe:
    """The probe started now and answered later (`why_not`): `run` prepares the rest of its
    session while strace traces /bin/true (about 10 ms, 30 on a busy machine)."""

    def __init__(self, strace: str, timeout: float = 20.0) -> None:
        self.strace, self.timeout = strace, timeout
        true = which("true", "/usr/bin:/bin") or "/bin/true"
        self._pid = 0
        self._error = ""
        self.output = b""  # what strace printed (why_not reads it)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self._fds: tuple[int, ...] = (out_r, err_r)
        null = os.devnull
        actions = [(os.POSIX_SPAWN_OPEN, 0, null, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 1, null, os.O_WRONLY, 0),
                   (os.POSIX_SPAWN_DUP2, err_w, 2), (os.POSIX_SPAWN_DUP2, out_w, 3)]  # fmt: skip
        try:
            # strace prints the environment it passes: there is none to print
            self._pid = os.posix_spawn(strace, strace_argv(strace, "/dev/fd/3", [true]), {},
                                       file_actions=actions)  # fmt: skip
        except OSError as exc:
            self._error = f"{strace} could not run: {exc}"
        finally:
            os.close(out_w)
            os.close(err_w)

    def why_not(self) -> str:
        """'' when strace can trace a child here, else why not (its own words)."""
        try:
            if not self._pid:
                return self._error
            got = _read_all(self._fds, time.monotonic() + self.timeout)
            if got is None:
                os.kill(self._pid, signal.SIGKILL)
                _status(self._pid)
                return f"{self.strace} could not run: timed out after {self.timeout:g} seconds"
            status = _status(self._pid)
            self.output, stderr = got
            err = stderr.decode("utf-8", "replace").strip().splitlines()
            if status == 0 and _exec_traced(self.output):
                return ""
            why = err[0] if err else f"exit status {status}, no exec traced"
            return f"strace cannot trace a child process here: {why}"
        finally:
            for fd in self._fds:
                os.close(fd)
            self._fds = ()


def _status(pid: int) -> int:
    """strace's exit status; 0 when someone else reaped it (as subprocess takes ECHILD):
    then its trace alone says whether it traced."""
    try:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except ChildProcessError:
        return 0


def _read_all(fds: tuple[int, ...], deadline: float) -> tuple[bytes, ...] | None:
    """Everything the pipes `fds` carry, to their ends; None when `deadline` came first."""
    got = {fd: b"" for fd in fds}
    poll = select.poll()
    for fd in fds:
        poll.register(fd, select.POLLIN)
    open_fds = set(fds)
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        for fd, _event in poll.poll(left * 1000):
            chunk = os.read(fd, 1 << 16)
            if chunk:
                got[fd] += chunk
            else:
                poll.unregister(fd)
                open_fds.discard(fd)
    return tuple(got[fd] for fd in fds)


def _exec_traced(output: bytes) -> bool:
    """The probe's trace shows an execve that returned 0 (whole, or its resumed half). A
    line test, not trace.parse: the probe runs before the server starts, and the parser's
    modules (6 ms to load) are not needed until the server's own trace is read."""
    lines = output.splitlines()
    return any(b"execve" in line and line.rstrip().endswith(b") = 0") for line in lines)


def probe(strace: str, timeout: float = 20.0) -> str:
    """'' when strace can trace a child here, else why not (its own words)."""
    return Probe(strace, timeout).why_not()


def probing(path: str | None) -> tuple[str | None, Probe | None, str]:
    """(strace, its probe started, '') or (None, None, why --trace cannot work here)."""
    if not sys.platform.startswith("linux"):
        return None, None, f"tracing needs Linux and strace (this is {sys.platform})"
    strace, why = find_strace(path)
    if strace is None:
        return None, None, why
    return strace, Probe(strace), ""


def forbidden(why: str) -> str:
    """A failed probe's answer, with where to look."""
    return (
        f"{why}. ptrace is forbidden here: check /proc/sys/kernel/yama/ptrace_scope "
        "(0 or 1 lets a process trace its own children), a container's seccomp profile "
        "or capabilities (docker: --cap-add SYS_PTRACE), or a no-new-privileges/seccomp "
        "policy around mcpshim"
    )


def trace_unavailable(path: str | None) -> tuple[str | None, str]:
    """(strace, '') when --trace can work, else (None, the reason and the fix)."""
    strace, started, why = probing(path)
    if strace is None or started is None:
        return None, why
    why = started.why_not()
    return (None, forbidden(why)) if why else (strace, "")


def require_trace(path: str | None) -> str:
    """For plain --trace: strace's path, or a UsageError that says why and how to fix it."""
    strace, why = trace_unavailable(path)
    if strace is None:
        raise UsageError(f"--trace: {why}{FIX}")
    return strace
