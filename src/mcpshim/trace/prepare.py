"""Whether `run` traces, decided before its server starts: strace found and probed (plain
--trace refuses to run untraced, exit 2; the default, auto, falls back to shims plus
sampling and says why), and the session's trace set up (trace.run.TraceRun)."""

from __future__ import annotations

import os
import time

from mcpshim.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:  # an untraced run's launch never loads the tracer's modules
    from collections.abc import Callable
    from typing import Any

    from mcpshim.paths import Locations
    from mcpshim.shim.rundirs import RunDirs
    from mcpshim.trace.run import TraceRun

__all__ = ["fallback_payload", "prepare", "prepare_meanwhile"]


def prepare(loc: Locations | RunDirs, mode: str, path: str | None) -> tuple[TraceRun | None, str]:
    """For `mcpshim run [--trace[=auto]]`: (the trace run, '') or, for auto, (None, why not).

    Plain --trace raises a UsageError (exit 2) before anything starts."""
    if mode == "off":
        return None, ""
    from mcpshim.trace.probe import FIX, trace_unavailable

    strace, why = trace_unavailable(path)
    if strace is None:
        if mode != "auto":
            raise UsageError(f"--trace: {why}{FIX}")
        return None, why
    return _set_up(loc, mode, strace)


def _set_up(loc: Locations | RunDirs, mode: str, strace: str) -> tuple[TraceRun | None, str]:
    from mcpshim.trace.run import TraceRun

    try:
        return TraceRun(loc, strace), ""
    except OSError as exc:  # a full or read-only disk: the command still runs (auto)
        why = f"cannot set up the trace in {os.path.join(loc.log_dir, 'trace')}: {exc.strerror}"
        if mode != "auto":
            raise UsageError(f"--trace: {why}") from None
        return None, why


def prepare_meanwhile(
    loc: Locations | RunDirs, mode: str, path: str | None
) -> Callable[[], tuple[TraceRun | None, str]]:
    """`prepare`, its probe running while the caller does other work: call what this
    returns for prepare's answer. Plain --trace probes first (prepare's UsageError, before
    anything starts)."""
    if mode != "auto":
        known = prepare(loc, mode, path)
        return lambda: known
    from mcpshim.trace.probe import forbidden, probing

    strace, started, why = probing(path)

    def answer() -> tuple[TraceRun | None, str]:
        if strace is None or started is None:
            return None, why
        failed = started.why_not()
        return (None, forbidden(failed)) if failed else _set_up(loc, mode, strace)

    return answer


def fallback_payload(session: str, boot_id: str, reason: str) -> dict[str, Any]:
    from mcpshim.trace.records import iso_time

    return {"session": session, "time": iso_time(time.time()), "boot_id": boot_id,
            "reason": reason, "using": "shims and sampling"}  # fmt: skip
