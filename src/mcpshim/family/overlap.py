"""Overlapping tool calls as a reader is told about them: once per group, and per call what
it may have run.

A process whose records could not tell its call from the others in flight (attribution,
family.evidence) is owned by its candidates. Calls that share such a process form a group
(transitively: calls 3-10 when each process could be any of a window of them), and the
group is said once, with every process that could belong to any of its calls. Each call of
a group may have run some of them: "one of 8 `git --version` started while calls #3-#10
were in flight", never "nothing".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from mcpshim.base.display import quote_argv
from mcpshim.family.tree import Image, Node

__all__ = ["MayHaveRun", "Overlap", "Owner", "calls_label", "may_have_run", "overlaps",
           "ran_images", "ran_line"]  # fmt: skip

Owner = int | tuple[int, ...] | None  # a call index, the candidates of an ambiguous one, none
_RANGES = 6  # ranges a label lists before it says "N calls between"


def calls_label(indices: Iterable[int]) -> str:
    """Call numbers as a reader counts them (#1 is the first): `#3-#10`, `#2, #5-#6`."""
    got = sorted(set(indices))
    if not got:
        return "none"
    runs: list[tuple[int, int]] = []
    for i in got:
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    if len(runs) > _RANGES:
        return f"{len(got)} calls between #{got[0] + 1} and #{got[-1] + 1}"
    return ", ".join(f"#{a + 1}" if a == b else f"#{a + 1}-#{b + 1}" for a, b in runs)


def ran_images(node: Node) -> list[Image]:
    """A process's execs that ran a program, each once: `#!/usr/bin/env node` run as npm
    (npm, then node with npm's path as its script) is one program, shown once."""
    out: list[Image] = []
    prev: Image | None = None
    for img in node.images:
        if not img.target or not img.entry:
            continue
        if prev is not None and img.args[:1] == (prev.target,):
            continue
        prev = img
        out.append(img)
    return out


def ran_line(img: Image) -> str:
    """An exec's command line as a verdict shows it (cut at 100 characters)."""
    head = img.command.encode() if img.source.startswith(("shim", "trace")) else (
        os.path.basename(img.argv0) or img.command.encode()
    )  # fmt: skip
    text = quote_argv([head, *img.args])
    return text if len(text) <= 100 else text[:97] + "..."


@dataclass(frozen=True)
class Overlap:
    """Calls that share processes no evidence could give to one of them, and those
    processes (the top of each: what it started belongs with it)."""

    calls: tuple[int, ...]
    tops: tuple[Node, ...]

    @cached_property
    def label(self) -> str:  # every verdict of the group heads with it: made once
        return calls_label(self.calls)


def _tops(nodes: Iterable[Node], owner: Mapping[int, Owner]) -> list[tuple[Node, tuple[int, ...]]]:
    out = []
    for node in nodes:
        mine = owner.get(node.id)
        if isinstance(mine, tuple):
            p = node.parent
            if p is None or owner.get(p.id) != mine:
                out.append((node, mine))
    return out


def overlaps(nodes: Iterable[Node], owner: Mapping[int, Owner]) -> list[Overlap]:
    """The groups, in the order of their first call: calls joined by any process that
    could be either's."""
    tops = _tops(nodes, owner)
    up: dict[int, int] = {}

    def find(i: int) -> int:
        root = i
        while up.get(root, root) != root:
            root = up[root]
        while up.get(i, i) != root:  # path halving keeps the chains short
            up[i], i = root, up[i]
        return root

    for _node, cands in tops:
        first = find(cands[0])
        for c in cands[1:]:
            other = find(c)
            if other != first:
                up[max(other, first)] = min(other, first)
                first = min(other, first)
    calls: dict[int, set[int]] = {}
    members: dict[int, list[Node]] = {}
    for node, cands in tops:
        root = find(cands[0])
        calls.setdefault(root, set()).update(cands)
        members.setdefault(root, []).append(node)
    return [Overlap(tuple(sorted(calls[r])), tuple(members[r])) for r in sorted(calls)]


@dataclass(frozen=True)
class MayHaveRun:
    """Execs with one command line that a call may have started, and the calls any of them
    could belong to."""

    line: str
    count: int
    calls: tuple[int, ...]

    def text(self) -> str:
        which = f"one of {self.count}" if self.count > 1 else "the"
        return (f"{which} `{self.line}` started while calls {calls_label(self.calls)} "
                "were in flight")  # fmt: skip


def may_have_run(
    groups: Sequence[Overlap], owner: Mapping[int, Owner]
) -> dict[int, list[MayHaveRun]]:
    """Per call of any group, what it may have run, by command line (one pass over the
    groups' processes: each exec is counted for every call it could belong to)."""
    counts: dict[int, dict[str, int]] = {}
    among: dict[int, dict[str, set[int]]] = {}
    for g in groups:
        for top in g.tops:
            cands = owner.get(top.id)
            if not isinstance(cands, tuple):
                continue
            lines = [ran_line(img) for n in top.walk() if n.known for img in ran_images(n)]
            for c in cands:
                mine, calls = counts.setdefault(c, {}), among.setdefault(c, {})
                for line in lines:
                    mine[line] = mine.get(line, 0) + 1
                    calls.setdefault(line, set()).update(cands)
    return {
        c: [MayHaveRun(line, n, tuple(sorted(among[c][line]))) for line, n in lines.items()]
        for c, lines in counts.items()
    }
