"""Rotation: rename the live log under its lock, and drop old segments with their spill files.

A sealed log's chain runs through its segments; dropping old segments drops the seals in
them, so rotation notes which (`segments-removed`: their numbers, and the head of each seal
a later one names as its previous) for `log verify` to tell pruning from deletion.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mcpshim.errors import InputError
from mcpshim.log.eventlog import encode_event, log_lock
from mcpshim.log.events import event_data
from mcpshim.log.execlog import bodies, current_boot_id, pointer_name, segments
from mcpshim.paths import Locations

__all__ = ["rotate"]


_SEAL = b"\0R\0=1\0=seal\0="


def _contents(path: Path) -> tuple[list[str], dict[int, str]]:
    """What a segment's pointers name, checked exactly as the reader checks them (a pointer
    cannot make rotation delete anything outside spill/: `../`, a path), and {n: head} of
    its seal records (see mcpshim.seal.record), their JSON checked as the reader checks an
    event's. One pass, in the reader's framing."""
    names: list[str] = []
    seals: dict[int, str] = {}
    with path.open("rb") as fh:
        for _, body in bodies(fh):
            if (name := pointer_name(body)) is not None:
                names.append(name)
            elif body.startswith(_SEAL):
                with contextlib.suppress(ValueError):
                    n = event_data(body[len(_SEAL) :]).get("n")
                    if type(n) is int:
                        seals[n] = hashlib.sha256(body + b"\0\n").hexdigest()
    return names, seals


def _removed_note(names: list[str], seals: dict[int, str]) -> bytes:
    """The `segments-removed` record: the seal numbers gone, and the heads of the last of
    each run of them (the only ones a remaining seal can name as its previous)."""
    runs: list[list[int]] = []
    for n in sorted(seals):
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    payload: dict[str, Any] = {
        "time": datetime.now(timezone.utc).isoformat(),
        "segments": names,
        "seals": runs,
        "heads": {str(b): seals[b] for _, b in runs},
    }
    return encode_event("segments-removed", payload)


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
            seals: dict[int, str] = {}
            for old in rotated[: len(rotated) - keep]:
                names, in_old = _contents(old)
                seals.update(in_old)
                for name in names:
                    with contextlib.suppress(FileNotFoundError):
                        (loc.spill_dir / name).unlink()
                old.unlink()
                removed.append(old)
            if seals:
                flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                fd = os.open(loc.log_file, flags, 0o600)
                try:
                    os.write(fd, _removed_note([p.name for p in removed], seals))
                finally:
                    os.close(fd)
    return new, removed
