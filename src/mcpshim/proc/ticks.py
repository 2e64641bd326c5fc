"""A process's start, from /proc/PID/stat alone (field 22: clock ticks since boot), what
pairs with its pid to name it: for `run`'s start (supervise.launch, trace.run), before
procinfo and psutil are loaded."""

from __future__ import annotations

__all__ = ["start_of"]


def start_of(pid: int) -> int | None:
    """The start ticks of a live process or a zombie (its stat is still there); None when it
    is gone (procinfo.start_ticks reads the same field)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        fields = data[data.rfind(b")") + 2 :].split()
        return int(fields[19]) if len(fields) >= 20 else None
    except (OSError, ValueError):
        return None
