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

__all__ = ["FIX", "find_strace", "probe", "require_trace", "trace_unavailable"]

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


def probe(strace: str, timeout: float = 20.0) -> str:
    """'' when strace can trace a child here, else why not (its own words)."""
    true = shutil.which("true", path="/usr/bin:/bin") or "/bin/true"
    with tempfile.TemporaryDirectory(prefix="mcpshim-probe-") as d:
        output = Path(d) / "trace"
        try:
            proc = subprocess.run(
                strace_argv(strace, str(output), [true]),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env={},  # strace prints the environment it passes: there is none to print
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{strace} could not run: {exc}"
        from mcpshim.trace.parse import read_output

        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        traced = any(ev.kind == "exec" for evs in read_output(output).values() for ev in evs)
        if proc.returncode == 0 and traced:
            return ""
        why = err[0] if err else f"exit status {proc.returncode}, no exec traced"
        return f"strace cannot trace a child process here: {why}"


def trace_unavailable(path: str | None) -> tuple[str | None, str]:
    """(strace, '') when --trace can work, else (None, the reason and the fix)."""
    if not sys.platform.startswith("linux"):
        return None, f"tracing needs Linux and strace (this is {sys.platform})"
    strace, why = find_strace(path)
    if strace is None:
        return None, why
    why = probe(strace)
    if why:
        return None, (
            f"{why}. ptrace is forbidden here: check /proc/sys/kernel/yama/ptrace_scope "
            "(0 or 1 lets a process trace its own children), a container's seccomp profile "
            "or capabilities (docker: --cap-add SYS_PTRACE), or a no-new-privileges/seccomp "
            "policy around mcpshim"
        )
    return strace, ""


def require_trace(path: str | None) -> str:
    """For plain --trace: strace's path, or a UsageError that says why and how to fix it."""
    strace, why = trace_unavailable(path)
    if strace is None:
        raise UsageError(f"--trace: {why}{FIX}")
    return strace
