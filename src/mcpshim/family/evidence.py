"""Which of several overlapping tool calls a process's own records name: evidence, not timing.

When a process starts while several calls are in flight and the kernel's pid marks cannot
tell them apart, its records may still say whose it is: its argv, its working directory or
the program or script it runs names a string, a path or a list item of one call's arguments
(`git -C D/d3 rev-parse` and `{"repo_path": "D/d3"}`), or its argv is one call's command
line. A process and everything it starts belong to one call, so the records of its
descendants count for it too (a `sh -c` line that started the git).

The arguments are compared as the relay recorded them (redacted, long strings cut) with the
argv the shim or tracer recorded (redacted by the same rules), so only what both kept can
match: a value with a redaction marker names nothing, nor does a string shorter than two
characters, nor a path that is the server's own working directory or above it (every
process starts there, so it tells no call from another). Numbers and booleans are no
evidence: `-n 20` is too easily anyone's.

`Candidates.choose` gives the calls whose arguments the records name; the caller files the
process under the one call when exactly one is named, and otherwise leaves it ambiguous
among those named (or all, when none is). Nothing here reads a time.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcpshim.family.tree import Image, Node

__all__ = ["ArgIndex", "Candidates", "Hits", "Match", "arg_values"]

_MARKERS = ("[REDACTED:", "more characters not recorded]")
_MIN = 2


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _values(value: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """(where, string) for every string in a JSON value: `repo_path`, `args[1]`, `opts.dir`."""
    if isinstance(value, str):
        yield (where or "argument", value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _values(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _values(v, f"{where}[{i}]")


def arg_values(value: Any) -> list[tuple[str, str]]:
    """(where, string) for every string of a call's arguments, redacted ones left out."""
    return [(w, s) for w, s in _values(value) if not any(m in s for m in _MARKERS)]


def _within(path: str, root: str) -> bool:
    """`path` is `root` or beneath it."""
    return path == root or path.startswith(root.rstrip("/") + "/")


Hits = dict[int, str]  # call index -> where in its arguments


@dataclass(frozen=True)
class ArgIndex:
    """The arguments of a session's calls as evidence can use them, indexed by value (so a
    record is looked up once, not once per call in flight)."""

    exact: dict[str, Hits] = field(default_factory=dict)  # string -> calls, where
    paths: dict[str, Hits] = field(default_factory=dict)  # absolute, normalised path
    lines: dict[tuple[str, ...], Hits] = field(default_factory=dict)  # a command line's words

    @classmethod
    def of(cls, arguments: Any, base: str) -> ArgIndex:
        """One call's (call 0). `base`: the server's working directory (relative paths are
        resolved from it)."""
        ix = cls()
        ix.add(0, arguments, base)
        return ix

    def add(self, call: int, arguments: Any, base: str) -> None:
        for where, s in _values(arguments):
            if len(s.strip()) < _MIN and s not in (".", ".."):
                continue
            if any(m in s for m in _MARKERS):
                continue
            if "/" in s or s in (".", ".."):
                p = os.path.normpath(os.path.join(base, s)) if base or s.startswith("/") else ""
                if not p or _within(base, p):
                    continue  # the server's own directory or above: every process is there
                self.paths.setdefault(p, {}).setdefault(call, where)
            self.exact.setdefault(s, {}).setdefault(call, where)
            if any(c.isspace() for c in s.strip()):
                try:
                    words = tuple(shlex.split(s))
                except ValueError:
                    words = tuple(s.split())
                if len(words) >= 2:
                    self.lines.setdefault(words, {}).setdefault(call, where)

    def _path_hits(self, path: str) -> Iterator[tuple[Hits, bool]]:
        """The argument paths that are `path` (exactly: True) or above it, nearest first."""
        hit = self.paths.get(path)
        if hit is not None:
            yield hit, True
        up = os.path.dirname(path)
        while up and up != "/":
            hit = self.paths.get(up)
            if hit is not None:
                yield hit, False
            up = os.path.dirname(up)

    def named(self, img: Image, base: str, among: Collection[int]) -> dict[int, str]:
        """Per call of `among` that this image's record names, why (the strongest reason:
        an argument, the program, the command line, a path, the working directory)."""
        out: dict[int, str] = {}
        alone = len(among) <= 1

        def take(hits: Hits | None, why: str) -> None:
            mine = [c for c in (hits or {}) if c in among]
            if not alone and len(mine) == len(among):
                return  # a value every candidate holds tells none from the others
            for call in mine:
                if call not in out:
                    out[call] = why.format((hits or {})[call])

        head = _text(img.argv0)
        args = [_text(a) for a in img.args]
        for a in args:
            take(self.exact.get(a), "its arguments name this call's {}")
        name = os.path.basename(head) or img.command
        for prog in dict.fromkeys((head, name, img.command)):
            take(self.exact.get(prog), "its program is this call's {}")
        for words in dict.fromkeys(((name, *args), (img.command, *args))):
            take(self.lines.get(words), "its command line is this call's {}")
        if not self.paths:
            return out
        cwd = "" if img.cwd_unknown else _text(img.cwd)
        for a in (head, _text(img.target), *args):
            if "/" in a and (cwd or a.startswith("/")):
                for hits, exactly in self._path_hits(os.path.normpath(os.path.join(cwd, a))):
                    what = "name" if exactly else "name a path under"
                    take(hits, f"its arguments {what} this call's {{}}")
        if cwd and cwd != base:
            for hits, exactly in self._path_hits(os.path.normpath(cwd)):
                take(
                    hits,
                    f"its working directory {'is' if exactly else 'is under'} this call's {{}}",
                )
        return out

    def names(self, img: Image, base: str) -> str | None:
        """Why this image's record names the one call of `of` (None: it names none)."""
        return self.named(img, base, (0,)).get(0)


@dataclass(frozen=True)
class Match:
    """The calls a process's records name, each with why (the first reason found)."""

    named: Mapping[int, str]  # call index -> reason

    @property
    def one(self) -> tuple[int, str] | None:
        return next(iter(self.named.items())) if len(self.named) == 1 else None


@dataclass
class Candidates:
    """The calls of one session as evidence, their arguments indexed once, when first
    needed (a session whose calls never overlap never builds it)."""

    arguments: Sequence[Any]
    base: str
    _index: ArgIndex | None = None

    def index(self) -> ArgIndex:
        if self._index is None:
            self._index = ArgIndex()
            for call, arguments in enumerate(self.arguments):
                self._index.add(call, arguments, self.base)
        return self._index

    def holds(self, call: int, value: str) -> bool:
        """Whether one of the call's argument strings holds `value` (a destination: a URL
        naming its host and port holds `127.0.0.1:8080`)."""
        host, _, port = value.rpartition(":")
        needles = (value, f"{host}:{port}") if host and port.isdigit() else (value,)
        if host and port in ("80", "443"):
            needles = (*needles, f"//{host}/", f"//{host}")
        args = self.arguments[call] if 0 <= call < len(self.arguments) else None
        return any(n in s for _w, s in _values(args) for n in needles if n)

    def choose(self, calls: Iterable[int], nodes: Sequence[Node]) -> Match:
        """The calls among `calls` that the records of `nodes` (a process, then the
        descendants it started) name, with why."""
        ix, among = self.index(), set(calls)
        named: dict[int, str] = {}
        for k, node in enumerate(nodes):
            for img in node.images:
                for call, why in ix.named(img, self.base, among).items():
                    if call not in named:
                        named[call] = (
                            f"a process it started, pid {node.pid} ({img.command}): {why}"
                            if k
                            else why
                        )
        return Match(named)
