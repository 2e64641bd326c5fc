"""The article's question, answered per tool call: what ran, from where, was it new, did it
reach the network, did it come from a file the agent can edit, did it outlive the call.

Review's findings say what is wrong; a reviewer of a session also needs what is *there*,
call by call, so that "nothing" is an answer too. `call_verdicts` reads each call's
processes from the attribution and its findings (already filed under it by
`mcp_rules.regroup`) and answers each question in a few words. Routine events (a pinned
git through PATH, a plain `sh -c` of one command) answer "no" and stay info findings.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mcpshim.base.display import quote_argv
from mcpshim.family.attribution import Attribution
from mcpshim.family.tree import Image, Node
from mcpshim.review.findings import CallRef, Finding, Severity
from mcpshim.review.rules.execpaths import script_of
from mcpshim.review.rules.mcp_rules import call_group, call_ref
from mcpshim.review.shapes import canonical

__all__ = ["QUESTIONS", "CallVerdict", "call_verdicts"]

#: the questions, in the order they are answered, and the rules whose findings answer "yes"
QUESTIONS: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("new", "new executable path", frozenset({"MCS102", "MCS103", "MCS111", "MCS112",
                                              "MCS115", "MCS119", "MCS120", "MCS402"})),
    ("network", "reached the network", frozenset({"MCS108", "MCS109", "MCS303", "MCS304",
                                                  "MCS305"})),
    ("editable", "command from an editable file", frozenset({"MCS107"})),  # + hooks, scripts
    ("outlived", "outlived the call", frozenset({"MCS301", "MCS501"})),
)  # fmt: skip
_MAX_RAN = 8


@dataclass(frozen=True)
class CallVerdict:
    call: CallRef
    label: str  # "tools/call run_test (id 3)"
    group: str  # the heading its findings are under
    ran: tuple[str, ...]  # each distinct command line, with how many times
    where: tuple[str, ...]  # the directories the executables ran from
    answers: tuple[tuple[str, str, tuple[str, ...]], ...]  # (key, question, what says yes)
    severity: Severity | None  # the worst finding under the call, if any
    is_error: bool | None

    def to_json(self) -> dict[str, object]:
        return {
            **self.call.to_json(),
            "group": self.group,
            "is_error": self.is_error,
            "severity": self.severity.label if self.severity is not None else None,
            "ran": list(self.ran),
            "from": list(self.where),
            **{key: list(yes) for key, _q, yes in self.answers},
        }


def _line(img: Image) -> str:
    argv = (
        [img.command.encode(), *img.args]
        if img.source.startswith(("shim", "trace"))
        else [
            os.path.basename(img.argv0) or img.command.encode(),
            *img.args,
        ]
    )
    text = quote_argv(argv)
    return text if len(text) <= 100 else text[:97] + "..."


def _owned(att: Attribution) -> dict[int, list[Node]]:
    """Each call's processes, in one walk (a walk per call is quadratic)."""
    out: dict[int, list[Node]] = {}
    for node in att.nodes():
        owner = att.owner.get(node.id)
        if isinstance(owner, int):
            out.setdefault(owner, []).append(node)
    return out


def _ran(nodes: list[Node]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    counts: dict[str, int] = {}
    dirs: dict[str, None] = {}
    for node in nodes:
        prev: Image | None = None
        for img in node.images:
            target = os.fsdecode(img.target)
            if not target or not img.entry:
                continue  # ran nothing; each exec is one image (family.model)
            if prev is not None and img.args[:1] == (prev.target,):
                continue  # `#!/usr/bin/env node` run as npm: one program, shown once
            prev = img
            counts[_line(img)] = counts.get(_line(img), 0) + 1
            if target.startswith("/"):
                dirs[os.path.dirname(canonical(target))] = None
    lines = [f"{k} (x{n})" if n > 1 else k for k, n in counts.items()]
    if len(lines) > _MAX_RAN:
        lines = [*lines[:_MAX_RAN], f"and {len(lines) - _MAX_RAN} more"]
    return tuple(lines), tuple(dirs)


def _editable(nodes: list[Node]) -> list[str]:
    """What a call ran from a file the agent can edit besides a package runner's scripts
    (MCS107): a git hook, a script an interpreter ran from a writable directory."""
    out: dict[str, None] = {}
    for node in nodes:
        for img in node.images:
            if not img.entry:
                continue
            target = os.path.join(os.fsdecode(img.cwd), os.fsdecode(img.target))
            script = script_of(img)
            if "/.git/hooks/" in target:
                out[f"git hook {target}"] = None
            elif script and os.access(os.path.dirname(script), os.W_OK):
                out[f"{img.command} ran {script}, in a directory the agent can write"] = None
    return list(out)


def _short(f: Finding) -> str:
    return f"{f.rule.id}: {f.message}"


def call_verdicts(atts: Iterable[Attribution], findings: Sequence[Finding]) -> list[CallVerdict]:
    """One verdict per recorded call of every relayed session, in the order made."""
    by_call: dict[tuple[str, object, str], list[Finding]] = {}
    for f in findings:
        if f.call is not None:
            by_call.setdefault((f.call.session, f.call.id, f.call.time), []).append(f)
    out = []
    for att in atts:
        owned = _owned(att)
        for call in att.calls:
            ref = call_ref(att, call)
            mine = by_call.get((ref.session, ref.id, ref.time), [])
            mine_nodes = owned.get(call.index, [])
            ran, where = _ran(mine_nodes)
            extra = {"editable": _editable(mine_nodes)}
            answers = tuple(
                (key, question, (*(_short(f) for f in mine if f.rule.id in rules),
                                 *extra.get(key, ())))
                for key, question, rules in QUESTIONS
            )  # fmt: skip
            worst = max((f.level for f in mine), default=None)
            out.append(
                CallVerdict(
                    ref,
                    call.label,
                    call_group(att, call),
                    ran,
                    where,
                    answers,
                    worst,
                    call.is_error,
                )
            )
    return out
