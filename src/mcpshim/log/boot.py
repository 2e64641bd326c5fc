"""Boot time anchors: exec records carry uptime and start ticks, made UTC with the boot's
time (boot/<boot id>, written precisely by mcpshim (`write_boot_anchor`) or once, to the
second, by a shim).

An anchor dates every record of its boot, so it is evidence: mcpshim never rewrites one
but to refine a shim's whole seconds, and the sealer seals every anchor it finds
(`anchor_texts`), so that `log verify` catches an edit (seal.boots)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from mcpshim.base.fdio import open_regular
from mcpshim.base.safewrite import make_private_dir, write_file
from mcpshim.errors import InputError

__all__ = [
    "MAX_SECONDS",
    "Anchors",
    "anchor_texts",
    "clock_seconds",
    "current_boot_id",
    "now_anchor",
    "refines",
    "write_boot_anchor",
]

ANCHOR_MAX = 64  # bytes an anchor file holds at most (a number and a newline)

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


def _read(path: Path) -> str | None:
    """An anchor file's text (stripped); None when it is no regular file of anchor size."""
    try:
        with open_regular(path) as fh:
            raw = fh.read(ANCHOR_MAX + 1)
    except (OSError, InputError):
        return None
    if len(raw) > ANCHOR_MAX:
        return None
    return raw.decode("ascii", "replace").strip()


def anchor_texts(boot_dir: Path) -> dict[str, str]:
    """Every anchor in `boot_dir` as its file says it ("" for one that is not an anchor
    file: a FIFO, a directory, too long), by boot id."""
    out: dict[str, str] = {}
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for p in boot_dir.iterdir():
            if not p.name.startswith("."):  # write_boot_anchor's temporary files
                text = _read(p)
                out[p.name] = "" if text is None else text
    return out


def refines(old: str, new: str) -> bool:
    """Whether `new` is mcpshim's precise reading of the boot a shim anchored to the second
    (`old`: /proc/stat's btime, whole seconds, truncated)."""
    if not old.isdigit():
        return False
    value = clock_seconds(new)
    return value is not None and -0.1 <= value - int(old) < 1.1


def write_boot_anchor(boot_dir: Path) -> None:
    """Give the shims a precise anchor for this boot (theirs, from /proc/stat, is whole
    seconds): written when there is none, or over a shim's that it refines; any other
    anchor is left as it is (an anchor dates its boot's records: it is evidence)."""
    boot = current_boot_id()
    if not boot:
        return
    make_private_dir(boot_dir)
    path, precise = boot_dir / boot, f"{now_anchor():.6f}"
    old = _read(path)
    if old is None and (path.exists() or path.is_symlink()):
        return  # not an anchor file: verify names it
    if old is not None and not refines(old, precise):
        return
    write_file(path, f"{precise}\n".encode(), 0o600)
