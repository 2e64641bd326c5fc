"""Rotation: rename the live log under its lock, and drop old segments with their spill files."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from mcpshim.errors import InputError
from mcpshim.log.eventlog import log_lock
from mcpshim.log.execlog import current_boot_id, segments, spill_names
from mcpshim.paths import Locations

__all__ = ["rotate"]


def _spills_named(path: Path) -> list[str]:
    """What the pointers of a segment name, checked exactly as the reader checks them: a
    pointer cannot make rotation delete anything outside spill/ (`../`, a path)."""
    with path.open("rb") as fh:
        return list(spill_names(fh))


def _prune_parent_markers(loc: Locations) -> None:
    """Drop markers of shells that are gone (they only spare a re-read; see the shim)."""
    boot = current_boot_id()
    with contextlib.suppress(FileNotFoundError):
        for m in loc.parents_dir.iterdir():
            marker_boot, _, pid = m.name.rpartition(".")
            if marker_boot != boot or not pid.isdigit() or not Path(f"/proc/{pid}").exists():
                with contextlib.suppress(FileNotFoundError):
                    m.unlink()


def rotate(loc: Locations, keep: int | None = None) -> tuple[Path | None, list[Path]]:
    """Rename the live log to the next segment under the lock; drop segments beyond `keep`.

    Shims append by path, so one that opened the live log before the rename finishes its
    write in the renamed segment: nothing is lost, and nothing is copied or truncated.
    """
    removed: list[Path] = []
    with log_lock(loc):
        for p in segments(loc):  # checked before anything is renamed or deleted
            if not p.is_file():
                raise InputError(f"{p}: not a regular file (a log segment is one); nothing rotated")
        rotated = [p for p in segments(loc) if p != loc.log_file]
        new: Path | None = None
        if loc.log_file.exists() and loc.log_file.stat().st_size > 0:
            n = int(rotated[-1].name[9:]) + 1 if rotated else 1
            new = loc.log_dir / f"exec.log.{n:06d}"
            os.rename(loc.log_file, new)
            os.close(os.open(loc.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
            rotated.append(new)
        _prune_parent_markers(loc)
        if keep is not None and len(rotated) > keep:
            for old in rotated[: len(rotated) - keep]:
                for name in _spills_named(old):
                    with contextlib.suppress(FileNotFoundError):
                        (loc.spill_dir / name).unlink()
                old.unlink()
                removed.append(old)
    return new, removed
