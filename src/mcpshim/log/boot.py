"""Boot time anchors: exec records carry uptime and start ticks, made UTC with the boot's
time (boot/<boot id>, written precisely by mcpshim (shim.logdir) or once, to the second,
by a shim)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from mcpshim.base.fdio import open_regular
from mcpshim.errors import InputError

__all__ = [
    "MAX_SECONDS",
    "Anchors",
    "clock_seconds",
    "current_boot_id",
    "now_anchor",
]

MAX_SECONDS = 1e11  # after the year 5000: not a clock reading (and past what datetime holds)


def now_anchor() -> float:
    """Boot time in UTC seconds, to the microsecond, from the two clocks the kernel keeps."""
    return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)


def current_boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def clock_seconds(b: bytes | str) -> float | None:
    """A clock reading in seconds (boot time, uptime); a value no clock gives is unknown."""
    try:
        value = float(b)
    except ValueError:
        return None
    return value if 0 <= value < MAX_SECONDS else None


class Anchors:
    """Boot time per boot id, from boot/<id> files (written by mcpshim, or once by a shim)."""

    def __init__(self, boot_dir: Path | None) -> None:
        self._dir = boot_dir
        self._cache: dict[str, float | None] = {}

    def get(self, boot_id: str) -> float | None:
        if boot_id not in self._cache:
            value = None
            if self._dir is not None and boot_id and "/" not in boot_id:
                with (
                    contextlib.suppress(OSError, ValueError, InputError),
                    open_regular(self._dir / boot_id) as fh,
                ):
                    value = clock_seconds(fh.read(64).strip())
            self._cache[boot_id] = value
        return self._cache[boot_id]
