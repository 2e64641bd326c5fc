"""Refusing reads of credential files under `run --contain`: everything else stays readable.

Landlock allows by rule and has no rule that refuses: a ruleset that handles reading files
refuses every read no rule allows. So the rules allow reading beneath every entry of every
directory on the way from `/` to a refused file, except the way itself and the refused
files: `/usr`, `/etc`, `/tmp` ... beneath `/`; every other entry of the home directory
beneath it; `~/.ssh/known_hosts` beside `~/.ssh/id_ed25519`. A symbolic link needs no rule
of its own (the kernel checks the file it leads to, where it really is).

What this cannot hold: an entry made after the session started in one of the directories
on the way (the home directory, `~/.ssh`, `~/.config`) has no rule, so it cannot be read
in the session; the workspace's `.env` files are left readable for that reason (the
workspace is where a session makes new files). Review still reports reading them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence

__all__ = ["beneath_any", "read_rules", "refused_reads"]


def beneath_any(path: str, tops: Iterable[str]) -> bool:
    """Whether `path` is one of `tops` or beneath one."""
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)


def refused_reads(
    found: Iterable[str], approved: Iterable[str], keep: Sequence[str] = ()
) -> tuple[str, ...]:
    """The credential files (and directories of them) found here that reading is refused
    for: those the lock does not list (by path, or by the file the path leads to), and none
    beneath `keep` (the workspace)."""
    listed = set(approved) | {os.path.realpath(p) for p in approved}
    out: dict[str, None] = {}
    for path in found:
        real = os.path.realpath(path)
        if path in listed or real in listed or beneath_any(real, keep):
            continue
        out[real] = None
    return tuple(out)


def read_rules(refused: Sequence[str]) -> Iterator[str]:
    """The paths to allow reading beneath so that all but `refused` may be read: every
    entry of each directory on the way to a refused path, but that way and those paths."""
    refused_set = set(refused)
    way: set[str] = set()
    for r in refused:
        p = r
        while p != "/":
            p = os.path.dirname(p)
            way.add(p)
    for d in sorted(way):
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue  # a directory the server could not list either
        for e in entries:
            if e.path in way or e.path in refused_set or e.is_symlink():
                continue
            yield e.path
