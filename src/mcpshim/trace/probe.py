"""Can strace trace here? The probe behind `mcpshim run --trace` and `--trace=auto`.

The probe runs the exact command line the session will use on `/bin/true` before the
server starts, so a missing strace, a yama ptrace_scope that forbids it or a container's
seccomp profile is found while there is still time to refuse (plain --trace: exit 2 with the
reason and the fix) or to fall back (--trace=auto, the default: shims plus sampling, and a
`trace-fallback` record that says why).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mcpshim.errors import UsageError
from mcpshim.shim.targets import unsafe_reason
from mcpshim.trace.strace import strace_argv

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
    found = shutil.which("strace", path=path)
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


class Probe:
    """The probe started now and answered later (`why_not`): `run` prepares the rest of its
    session while strace traces /bin/true (about 10 ms, 30 on a busy machine)."""

    def __init__(self, strace: str, timeout: float = 20.0) -> None:
        self.strace, self.timeout = strace, timeout
        true = shutil.which("true", path="/usr/bin:/bin") or "/bin/true"
        self._dir = tempfile.mkdtemp(prefix="mcpshim-probe-")
        self._output = Path(self._dir) / "trace"
        self._proc: subprocess.Popen[bytes] | None = None
        self._error = ""
        try:
            self._proc = subprocess.Popen(
                strace_argv(strace, str(self._output), [true]),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env={},  # strace prints the environment it passes: there is none to print
            )
        except OSError as exc:
            self._error = f"{strace} could not run: {exc}"

    def why_not(self) -> str:
        """'' when strace can trace a child here, else why not (its own words)."""
        try:
            if self._proc is None:
                return self._error
            try:
                _, stderr = self._proc.communicate(timeout=self.timeout)
            except subprocess.TimeoutExpired as exc:
                self._proc.kill()
                self._proc.communicate()
                return f"{self.strace} could not run: {exc}"
            err = stderr.decode("utf-8", "replace").strip().splitlines()
            traced = _exec_traced(self._output)
            if self._proc.returncode == 0 and traced:
                return ""
            why = err[0] if err else f"exit status {self._proc.returncode}, no exec traced"
            return f"strace cannot trace a child process here: {why}"
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)


def _exec_traced(output: Path) -> bool:
    """The probe's trace shows an execve that returned 0 (whole, or its resumed half). A
    line test, not trace.parse: the probe runs before the server starts, and the parser's
    modules (6 ms to load) are not needed until the server's own trace is read."""
    try:
        lines = output.read_bytes().splitlines()
    except OSError:
        return False
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
