"""The --trace capability probe: strace present and allowed, missing, or ptrace forbidden."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcpshim.errors import UsageError
from mcpshim.trace.probe import require_trace, trace_unavailable
from tests.fixtures.home import SRC
from tests.fixtures.seccomp import DENY_PTRACE_PRELUDE

LINUX = sys.platform.startswith("linux")
needs_strace = pytest.mark.skipif(
    not LINUX or shutil.which("strace") is None, reason="needs Linux with strace"
)

# Install a seccomp filter that makes ptrace(2) fail with EPERM, as a container's default
# profile does, then run the probe: the filter is inherited by strace.
DENY_PTRACE = (
    DENY_PTRACE_PRELUDE
    + r"""
from mcpshim.trace.probe import trace_unavailable
print(json.dumps(trace_unavailable(None)))
"""
)


@needs_strace
def test_probe_succeeds_here() -> None:
    strace, why = trace_unavailable(None)
    assert why == ""
    assert strace is not None and os.path.isabs(strace)
    assert require_trace(None) == strace


def test_strace_missing_from_path(tmp_path: Path) -> None:
    strace, why = trace_unavailable(str(tmp_path))
    assert strace is None
    if LINUX:
        assert "strace is not installed or not on PATH" in why
        assert "apt-get install strace" in why
    # The reason says what is missing; plain --trace adds how to run without it.
    with pytest.raises(UsageError, match=r"--trace: .*the default \(--trace=auto\) falls back"):
        require_trace(str(tmp_path))


@needs_strace
def test_strace_in_a_world_writable_dir_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "bin"
    d.mkdir()
    d.chmod(0o777)
    strace = shutil.which("strace")
    assert strace is not None
    os.symlink(strace, d / "strace")
    got, why = trace_unavailable(str(d))
    assert got is None
    assert "refusing" in why and ("writable" in why or "temporary directory" in why)


@needs_strace
@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="syscall numbers")
def test_ptrace_forbidden_by_seccomp() -> None:
    src = str(SRC)
    out = subprocess.run(
        [sys.executable, "-c", DENY_PTRACE],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": src},
        check=True,
        timeout=60,
    )
    strace, why = json.loads(out.stdout)
    assert strace is None
    assert "strace cannot trace a child process here" in why
    assert "ptrace" in why and "Operation not permitted" in why


@needs_strace
def test_a_probe_reaped_by_someone_else_is_answered_by_its_trace() -> None:
    """A launch's reaper thread reaps every child that ends, strace's probe included: its
    exit status is then gone, and what it traced answers (as subprocess took ECHILD)."""
    from mcpshim.trace.probe import Probe

    strace = shutil.which("strace")
    assert strace is not None
    started = Probe(strace)
    os.waitpid(started._pid, 0)  # the reaper's doing: the status is no longer ours
    assert started.why_not() == ""
    assert b"execve(" in started.output
