"""`log verify`'s look at the `parents/` markers.

A marker `parents/<boot>.<pid>` spares a shell's later shimmed children the re-read of its
command line: the first child kept it in its record. So a marker suppresses evidence, and
one planted for pids to come (empty, dated ahead) would hide the next shells' lines. A shim
writes into its marker the shell's start time (stat field 22), and the record it writes
carries that same boot id, parent pid and parent start: a marker is the shim's only when an
exec record in the log backs it so. Any other (empty, not a start time, not a regular file,
or no record behind it: planted, or the record's write failed) is named.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from mcpshim.base.fdio import open_regular_fd
from mcpshim.errors import InputError
from mcpshim.log.execlog import segments
from mcpshim.paths import Locations
from mcpshim.seal.record import mapped

__all__ = ["unbacked"]

#: an exec record with parent evidence: its boot id, parent pid and parent start (fields 3,
#: 5 and 7 of the positional record; log-format.md)
_EXEC = re.compile(
    rb"\0R\0=1\0=exec\0=[^\0]*\0=[^\0]*\0=([^\0]*)\0=[^\0]*\0=([^\0]*)\0=[^\0]*\0=([^\0]+)\0="
)
_MAX = 64  # a marker holds a start time and a newline


def _read_marker(path: Path) -> str | None:
    """The marker's text, or None when it is not a regular file (a FIFO is never opened
    blocking, a symlink never followed)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, _MAX + 1).decode("ascii", "replace")
    finally:
        os.close(fd)


def _claims(loc: Locations) -> tuple[dict[tuple[str, str, str], str], list[tuple[str, str]]]:
    """What each marker claims, (boot, pid, start) -> its name; and the markers that claim
    nothing a shim writes, with why."""
    claims: dict[tuple[str, str, str], str] = {}
    bad: list[tuple[str, str]] = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for m in sorted(loc.parents_dir.iterdir()):
            where = f"parents/{m.name}"
            boot, _, pid = m.name.rpartition(".")
            text = _read_marker(m)
            if text is None:
                bad.append((where, "not a regular file: no marker a shim writes"))
            elif not boot or not pid.isdigit():
                bad.append((where, "not named <boot id>.<pid>, as a shim names its markers"))
            elif not text.strip():
                bad.append((where, _EMPTY))
            elif not text.strip().isdigit() or len(text) > _MAX:
                bad.append((where, "holds no start time: no shim wrote it"))
            else:
                claims[(boot, pid, text.strip())] = where
    return claims, bad


_EMPTY = (
    "is empty: a shim writes the shell's start time into its marker (planted, or left by "
    "the shim of an older mcpshim); it keeps the next shell of that pid from being recorded"
)


def _records(loc: Locations) -> Iterator[tuple[str, str, str]]:
    """(boot, parent pid, parent start) of every exec record with parent evidence, in the
    segments and the spill files."""
    for path in [*segments(loc), *_spills(loc)]:
        try:
            fd = open_regular_fd(path)
        except (OSError, InputError):
            continue
        try:
            with mapped(fd, os.fstat(fd).st_size) as buf:
                for m in _EXEC.finditer(cast(bytes, buf)):  # re reads an mmap as it is
                    boot, ppid, start = (g.decode("ascii", "replace") for g in m.groups())
                    yield boot, ppid, start
        finally:
            os.close(fd)


def _spills(loc: Locations) -> list[Path]:
    try:
        return sorted(p for p in loc.spill_dir.iterdir() if not p.name.startswith("."))
    except OSError:
        return []


def unbacked(loc: Locations) -> list[tuple[str, str]]:
    """Every marker no record backs: (where, why)."""
    claims, bad = _claims(loc)
    if claims:
        for key in _records(loc):
            claims.pop(key, None)
            if not claims:
                break
    for (boot, pid, start), where in claims.items():
        bad.append(
            (
                where,
                f"no record in the log holds the command line of shell {pid} started at "
                f"{start} (boot {boot}), which it says is kept: planted, or the record's "
                "write failed; it kept that shell's later children from recording the line",
            )
        )
    return sorted(bad)
