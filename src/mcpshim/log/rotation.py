"""Rotation: rename the live log under its lock, and drop old segments with their spill
files, each drop said in a `log-dropped` record first (retention decides which).

A sealed log's chain runs through its segments; dropping old segments drops the seals in
them, so rotation notes which (`segments-removed`: their numbers, and the head of each seal
a later one names as its previous) for `log verify` to tell pruning from deletion.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mcpshim.base import fdio
from mcpshim.errors import InputError
from mcpshim.log.eventlog import encode_event, log_lock
from mcpshim.log.events import event_data
from mcpshim.log.execlog import current_boot_id, pointer_name, segments
from mcpshim.log.framing import bodies
from mcpshim.paths import Locations

__all__ = [
    "Describe",
    "Dropping",
    "append_locked",
    "check_segments",
    "rotate",
    "rotate_locked",
]

#: what a drop's record says about a segment (retention's describer), by its path and rule
Describe = Callable[[Path, str], Mapping[str, Any]]

_SEAL = b"\0R\0=1\0=seal\0="


def _contents(path: Path) -> tuple[list[str], dict[int, str]]:
    """What a segment's pointers name, checked exactly as the reader checks them (a pointer
    cannot make rotation delete anything outside spill/: `../`, a path), and {n: head} of
    its seal records (see mcpshim.seal.record), their JSON checked as the reader checks an
    event's. One pass, in the reader's framing."""
    names: list[str] = []
    seals: dict[int, str] = {}
    with path.open("rb") as fh:
        for _, body in bodies(fh, "", []):
            if (name := pointer_name(body)) is not None:
                names.append(name)
            elif body.startswith(_SEAL):
                with contextlib.suppress(ValueError):
                    n = event_data(body[len(_SEAL) :]).get("n")
                    if type(n) is int:
                        seals[n] = hashlib.sha256(body + b"\0\n").hexdigest()
    return names, seals


def _removed_note(names: list[str], seals: dict[int, str]) -> dict[str, Any]:
    """The `segments-removed` record: the seal numbers gone, and the heads of the last of
    each run of them (the only ones a remaining seal can name as its previous)."""
    runs: list[list[int]] = []
    for n in sorted(seals):
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return {
        "time": datetime.now(timezone.utc).isoformat(),
        "segments": names,
        "seals": runs,
        "heads": {str(b): seals[b] for _, b in runs},
    }


def _prune_parent_markers(loc: Locations, every: bool = False) -> None:
    """Drop markers of shells that are gone (they only spare a re-read; see the shim); with
    `every`, all of them: segments went, and a marker stands for a record in the log (the
    shells still running record their lines once more, in the live log)."""
    boot = current_boot_id()
    with contextlib.suppress(FileNotFoundError):
        for m in loc.parents_dir.iterdir():
            marker_boot, _, pid = m.name.rpartition(".")
            gone = marker_boot != boot or not pid.isdigit() or not Path(f"/proc/{pid}").exists()
            if every or gone:
                with contextlib.suppress(FileNotFoundError):
                    m.unlink()


def check_segments(loc: Locations) -> None:
    """Every segment is a regular file: checked before anything is renamed or deleted."""
    for p in segments(loc):
        if not p.is_file():
            raise InputError(f"{p}: not a regular file (a log segment is one); nothing rotated")


def append_locked(loc: Locations, kind: str, payload: Mapping[str, Any]) -> None:
    """One record into the live log, by a caller that holds the log's lock."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(loc.log_file, flags, 0o600)
    try:
        fdio.write_all(fd, encode_event(kind, payload))
    finally:
        os.close(fd)


def rotate_locked(loc: Locations) -> Path | None:
    """Rename the live log to the next segment (the caller holds the lock and has checked
    the segments); None if the live log is empty.

    Shims append by path, so one that opened the live log before the switch finishes its
    write in the new segment: nothing is lost, and nothing is copied or truncated. The live
    name never goes missing: the segment is a second name for the file first, then a new
    empty file (0600) is renamed over the live name. A shim that found the live log missing
    for an instant would have created it with its caller's umask.
    """
    rotated = [p for p in segments(loc) if p != loc.log_file]
    new: Path | None = None
    if loc.log_file.exists() and loc.log_file.stat().st_size > 0:
        n = int(rotated[-1].name[9:]) + 1 if rotated else 1
        new = loc.log_dir / f"exec.log.{n:06d}"
        fresh = loc.log_dir / ".exec.log.new"
        with contextlib.suppress(FileNotFoundError):
            fresh.unlink()  # left by a rotation that died half-way
        os.close(os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        try:
            os.link(loc.log_file, new)
        except OSError:  # a file system without hard links: the old way, with its instant
            fresh.unlink()
            os.rename(loc.log_file, new)
            os.close(
                os.open(loc.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
            )
        else:
            os.rename(fresh, loc.log_file)
    _prune_parent_markers(loc)
    return new


class Dropping:
    """Segments dropped under the lock: each said in a `log-dropped` record before it goes
    with its spill files; at the end one `segments-removed` record for the seals in them."""

    def __init__(self, loc: Locations, describe: Describe) -> None:
        self.loc, self.describe = loc, describe
        self.removed: list[Path] = []
        self.seals: dict[int, str] = {}

    def drop(self, old: Path, rule: str) -> None:
        append_locked(self.loc, "log-dropped", self.describe(old, rule))
        names, seals = _contents(old)
        self.seals.update(seals)
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                (self.loc.spill_dir / name).unlink()
        old.unlink()
        self.removed.append(old)

    def close(self) -> None:
        if self.removed:
            _prune_parent_markers(self.loc, every=True)
        if self.seals:
            note = _removed_note([p.name for p in self.removed], self.seals)
            append_locked(self.loc, "segments-removed", note)


def rotate(
    loc: Locations, keep: int | None = None, describe: Describe | None = None
) -> tuple[Path | None, list[Path]]:
    """Rename the live log to the next segment under the lock; drop segments beyond `keep`
    (each with a `log-dropped` record saying what it held, from `describe`)."""
    with log_lock(loc):
        check_segments(loc)
        new = rotate_locked(loc)
        rotated = [p for p in segments(loc) if p != loc.log_file]
        dropping = Dropping(loc, describe or _bare)
        if keep is not None and len(rotated) > keep:
            for old in rotated[: len(rotated) - keep]:
                dropping.drop(old, f"keep {keep}")
        dropping.close()
    return new, dropping.removed


def _bare(path: Path, rule: str) -> dict[str, Any]:
    return {"segment": path.name, "size": path.stat().st_size, "rule": rule}
