"""How one process image reads in every view: its time stamp, its argv as a reader knows it,
and the one-line evidence a finding quotes. Renderers and rules share these so an image
reads the same wherever it appears.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from mcpshim.base.display import quote_arg, quote_argv
from mcpshim.family.tree import Image

__all__ = ["argv_of", "evidence_line", "fork_words", "parent_line", "session_parents", "stamp"]


def stamp(img: Image) -> str:
    """An image's time as every view shows it: UTC to the millisecond, '?' when unknown.

    Formatted field by field, as strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] would (a tree
    prints one per image; strftime costs three times as much); strftime itself below year
    1000, where C libraries differ on padding."""
    t = img.time
    if t is None:
        return "?"
    if t.year < 1000:
        return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return (
        f"{t.year}-{t.month:02}-{t.day:02}T{t.hour:02}:{t.minute:02}:{t.second:02}"
        f".{t.microsecond // 1000:03}Z"
    )


def parent_line(img: Image) -> str:
    """The shell that started the process, its argv quoted like any (an older shim's line,
    whose argument boundaries were lost, as one argument); '' when unknown."""
    if img.parent_argv:
        return quote_argv(img.parent_argv)
    return quote_arg(img.parent_cmdline) if img.parent_cmdline else ""


def fork_words(img: Image) -> str:
    """A process that never exec'd (family.trace_merge.fork_image): it runs its parent's
    program; what the sampler saw of its command line, when it saw it."""
    seen = f"; seen as {quote_argv([img.argv0, *img.args])}" if img.argv0 else ""
    return f"forked, never exec'd{seen}"


def evidence_line(img: Image) -> str:
    """One image as a finding's evidence: source, time, pids, argv and what it reached, and
    the line of the shell that started it when a shim kept that."""
    if img.source == "trace-fork":
        return f"[{img.source}] {stamp(img)} pid {img.pid} ppid {img.ppid}: {fork_words(img)}"
    parent = parent_line(img)
    return (
        f"[{img.source}] {stamp(img)} pid {img.pid} ppid {img.ppid}: "
        f"{_quoted(_head(img), img.args)} -> {os.fsdecode(img.target) or '?'}"
        + (f"; started by {parent}" if parent else "")
    )


def argv_of(img: Image) -> list[bytes]:
    """argv as a reader knows it: a shim's argv[0] is its own path, so show the command name."""
    return [_head(img), *img.args]


def _head(img: Image) -> bytes:
    return img.command.encode() if img.source == "shim" else img.argv0


@lru_cache(maxsize=65_536)
def _quoted(head: bytes, args: tuple[bytes, ...]) -> str:
    """An argv quoted once: logs repeat their command lines, and a session relayed with
    --mcp keeps evidence (one line each) for every occurrence of a finding."""
    return quote_argv([head, *args])


def session_parents(start: Mapping[str, Any]) -> dict[tuple[str, int], str]:
    """What a session-start record says the processes above its family are, by (boot id,
    pid): the `mcpshim run` supervisor, and the session's command it started (which no
    shim records, and sampling misses when it is short-lived). Views name them rather than
    show a pid whose parent is "not in the log"."""
    boot, sid = str(start.get("boot_id") or ""), start.get("session")
    out: dict[tuple[str, int], str] = {}
    pid, child = start.get("pid"), start.get("child_pid")
    if isinstance(pid, int):
        out[(boot, pid)] = f"mcpshim run (supervisor of session {sid})"
    if isinstance(child, int):
        cmd = start.get("command")
        what = quote_argv([str(a).encode() for a in cmd]) if isinstance(cmd, list) else "?"
        out[(boot, child)] = f"{what} (the command of session {sid}, started by mcpshim run)"
    return out
