"""Every reader files a fact under the same call (issue 37): review's JSON and text, the
report's call sections and the approval cards it carries (the cards `mcpshim approve` shows,
from the same builder).

The corpus asserts review's JSON against what a careful reviewer expects; this module checks
that the other readers say the same of the session, so an expectation met in JSON is met
everywhere a user looks:

- a finding's evidence names a process and the call it is filed under (`pid`, `call_id`):
  the report lists that pid in that call's section and in no other call's;
- the text's block of a call says what its JSON block `ran`, in the same words;
- a call's report section lists as many execs as its JSON block counts;
- a tool's card names no executable its calls' sections do not, and every executable a
  process of its calls ran is on it unless that process or one above it outlived the call
  (a helper the server keeps, its start-up included, is the server's: on the card of what
  runs outside calls).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcpshim.base.display import safe

__all__ = ["Report", "parse_report", "reader_problems"]

_CALL_HEAD = re.compile(r"^### #(\d+) (\S+) (.*) \(id (.*)\)$")
_PROC = re.compile(r"^\s*- (exec )?pid (\d+) (`+) ?(.*?) ?\3( — (.*))?$")
_CARD_HEAD = re.compile(r"^### Tool `(.*)`$")
_EXECUTABLE = re.compile(r"^- executable: `(.*?)  ")
_MORE = re.compile(r"^and (\d+) more$")


def _unmd(text: str) -> str:
    return re.sub(r"\\([\\`*_\[\]#|<>])", r"\1", text)


@dataclass
class Section:
    """One call's section of the report: its processes' images, in order."""

    name: str
    id: str
    pids: set[int] = field(default_factory=set)
    #: pid, target, whether it (or a process above it) outlived its call
    execs: list[tuple[int, str, bool]] = field(default_factory=list)


@dataclass
class Report:
    sections: dict[str, Section]  # by the call's id, as the report prints it
    cards: dict[str, set[str]]  # tool -> the executables its card names


def parse_report(md: str) -> Report:
    """The call sections and approval cards of `mcpshim report --format md`."""
    sections: dict[str, Section] = {}
    cards: dict[str, set[str]] = {}
    sec: Section | None = None
    card: set[str] | None = None
    stack: list[bool] = []  # by depth: the process there, or one above it, outlived its call
    last = ""  # the previous image's target
    for line in md.splitlines():
        if line.startswith("## "):
            sec = card = None
        if m := _CALL_HEAD.match(line):
            sec, card = Section(_unmd(m[3]), _unmd(m[4])), None
            sections[sec.id] = sec
        elif line.startswith("### "):
            sec = None
            if h := _CARD_HEAD.match(line):
                card = cards.setdefault(h[1], set())
        elif sec is not None and (p := _PROC.match(line)):
            depth = (len(line) - len(line.lstrip(" "))) // 2
            pid, image, note = int(p[2]), p[4].replace("\\|", "|"), p[6] or ""
            if not p[1]:  # a process (not a later exec of one): under an outlived one?
                del stack[depth:]
                stack.append("outlived its call" in note or any(stack))
            sec.pids.add(pid)
            command, _, target = image.rpartition("  -> ")
            words = command.split()
            # npm's `#!/usr/bin/env node` is one program however many execs ran it
            # (family.overlap.ran_images), as review's `ran` counts it
            script = bool(p[1]) and len(words) > 1 and words[1] == last
            last = target
            if target != "?" and not script:
                sec.execs.append((pid, target, stack[-1]))
        elif card is not None and (e := _EXECUTABLE.match(line)):
            card.add(e[1])
    return Report(sections, cards)


def _filing(review: Mapping[str, Any], rep: Report) -> list[str]:
    bad = []
    for f in review.get("findings", []):
        for ev in f.get("evidence", []):
            pid, call = ev.get("pid"), ev.get("call_id")
            if not isinstance(pid, int) or call is None:
                continue
            listed = [s for s in rep.sections.values() if pid in s.pids]
            if not listed:
                continue  # the server's own process, or one of no call (start-up)
            ids = sorted(s.id for s in listed)
            if ids != [str(call)]:
                bad.append(f"{f['rule']}: pid {pid} is call id {call}'s in review's JSON, "
                           f"under call id(s) {', '.join(ids)} in the report")  # fmt: skip
    return bad


def _text_blocks(text: str) -> dict[str, str]:
    """Call id -> the `ran:` line of its block in review's text."""
    out: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if line.startswith("== "):
            m = re.search(r": \S+ .* \(id (.*)\)$", line)
            key = m[1] if m and " tool call at " in line else None
        elif key is not None and line.startswith("   ran: "):
            out[key] = line[len("   ran: ") :]
            key = None
    return out


def _counted(ran: list[str]) -> int | None:
    """How many execs a JSON block's `ran` counts (None: `and N more` hides some)."""
    n = 0
    for line in ran:
        if _MORE.match(line):
            return None
        m = re.search(r" \(x(\d+)\)$", line)
        n += int(m[1]) if m else 1
    return n


def reader_problems(review: Mapping[str, Any], text: str, md: str) -> list[str]:
    """Where review's text, the report or its cards file a fact unlike review's JSON."""
    rep = parse_report(md)
    bad = _filing(review, rep)
    blocks = _text_blocks(text)
    by_tool: dict[str, list[Section]] = {}
    for c in review.get("calls", []):
        cid, ran = str(c.get("id")), list(c.get("ran", []))
        said = blocks.get(cid)
        want = safe("; ".join(ran)) if ran else None
        if said is None:
            bad.append(f"call id {cid} ({c.get('name')}): no block in review's text")
        elif want is not None and said != want:
            bad.append(f"call id {cid}: text says it ran {said!r}, JSON {want!r}")
        sec = rep.sections.get(cid)
        if sec is None:
            bad.append(f"call id {cid} ({c.get('name')}): no section in the report")
            continue
        by_tool.setdefault(str(c.get("name")), []).append(sec)
        n = _counted(ran)
        if n is not None and n != len(sec.execs):
            bad.append(f"call id {cid}: JSON counts {n} exec(s), the report lists "
                       f"{len(sec.execs)}")  # fmt: skip
    for tool, secs in by_tool.items():
        card = rep.cards.get(tool)
        if card is None:
            bad.append(f"{tool}: called, but no approval card")
            continue
        execs = {t for s in secs for _p, t, _o in s.execs}
        stayed = {t for s in secs for _p, t, o in s.execs if not o}
        if extra := sorted(card - execs):
            bad.append(f"{tool}: its card names {extra}, which none of its calls ran")
        if missing := sorted(stayed - card):
            bad.append(f"{tool}: its calls ran {missing}, not on its card")
    return bad
