"""PATH rules (MCS20x): one small pure function per rule over the facts `pathcheck.facts` gathers.

A bare `git` is a PATH lookup, not an identity: whichever entry holds a `git` first decides
what runs. These rules say which entries let someone other than root or the process's user
decide that, and, for each sensitive command, which file wins and which ones it hides.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from mcpshim.pathcheck.facts import EntryFacts, probe, under
from mcpshim.review.findings import Evidence, Finding, Rule, Severity, define_rule

__all__ = [
    "PATH_RULES",
    "LintSettings",
    "Scope",
    "Shadow",
    "lint_facts",
    "lint_path",
    "shadows",
    "split_path",
]

CWE = ("CWE-427",)

EMPTY = define_rule(
    "MCS201",
    "path-empty-entry",
    Severity.HIGH,
    "An empty PATH entry means the current directory, which the process does not control.",
    "Remove the empty entry (a leading, trailing or doubled ':').",
    CWE,
    answers=(),
)
RELATIVE = define_rule(
    "MCS202",
    "path-relative-entry",
    Severity.HIGH,
    "A '.' or relative PATH entry is looked up from whatever directory the process is in.",
    "Replace the entry with an absolute directory, or drop it.",
    CWE,
    answers=(),
)
MISSING = define_rule(
    "MCS203",
    "path-missing-entry",
    Severity.MEDIUM,
    "A PATH entry does not exist or is not a directory; whoever creates it later decides "
    "what bare names mean.",
    "Remove the entry or create it as a root-owned, non-writable directory.",
    CWE,
    answers=(),
)
TEMP = define_rule(
    "MCS204",
    "path-temp-dir",
    Severity.HIGH,
    "A PATH entry is inside a temporary directory that other processes can write.",
    "Never put a temporary directory on a server's PATH; install tools somewhere owned.",
    CWE,
    answers=(),
)
WRITABLE = define_rule(
    "MCS205",
    "path-writable-dir",
    Severity.HIGH,
    "A PATH entry, or a directory or symlink on the way to it, can be changed by a group, "
    "by everyone, or by another non-root user.",
    "chmod go-w the directory, fix its owner, or remove the entry from PATH.",
    CWE,
    answers=(),
)
PROJECT = define_rule(
    "MCS206",
    "path-project-dir-first",
    Severity.MEDIUM,
    "A project-local directory (node_modules/.bin, a virtualenv's bin, a bin inside a "
    "writable checkout) comes before the system directories, so the project decides what "
    "bare names mean.",
    "Move project directories after the system directories, or call project tools by path.",
    CWE,
    answers=(),
)
SHIM = define_rule(
    "MCS207",
    "path-shim-dir-not-first",
    Severity.MEDIUM,
    "The mcpshim shim directory is not the first PATH entry, so commands found earlier run "
    "without a record.",
    "Put the shim directory first (`mcpshim path`, or `mcpshim wrap-config`).",
    answers=(),
)
DUPLICATE = define_rule(
    "MCS208",
    "path-duplicate-entry",
    Severity.LOW,
    "A PATH entry appears more than once; the later copy only adds confusion about order.",
    "Remove the later duplicate.",
    answers=(),
)
SHADOWED = define_rule(
    "MCS209",
    "path-shadowed-command",
    Severity.HIGH,
    "A sensitive command resolves to a file outside the trusted directories, hiding the "
    "ones after it.",
    "Remove the directory from PATH or move it after the trusted directories; pin the "
    "command by absolute path.",
    CWE,
    answers=(),
)


@dataclass(frozen=True)
class LintSettings:
    """Everything the rules consult besides the facts (from the policy and the options)."""

    trusted_dirs: tuple[str, ...]
    temp_dirs: tuple[str, ...]
    sensitive_commands: tuple[str, ...]
    shim_dir: str
    shim_source: str  # how the shim dir was chosen, said in the finding
    owners: frozenset[int]  # uids whose directories are fine: root and the process's user
    #: the other shim directories mcpshim installed (shim.registry), when --dir was not given
    other_shim_dirs: tuple[str, ...] = ()

    def trusted(self, f: EntryFacts) -> bool:
        """A trusted directory from the policy, or the shim dir itself."""
        return self.system(f) or _among(f, (self.shim_dir, *self.other_shim_dirs))

    def system(self, f: EntryFacts) -> bool:
        return _among(f, self.trusted_dirs)


def _among(f: EntryFacts, dirs: Iterable[str]) -> bool:
    names = {d.rstrip("/") or "/" for d in dirs}
    names |= {os.path.realpath(d) for d in names}
    return f.absolute.rstrip("/") in names or (f.real or "") in names


@dataclass(frozen=True)
class Scope:
    """Where findings belong: a group (PATH source or server), a file and line if any."""

    group: str
    location: str = ""
    line: int | None = None
    source: str = ""


def split_path(value: str) -> list[str]:
    return value.split(":")


def _finding(rule: Rule, scope: Scope, f: EntryFacts | None, msg: str, cmd: str = "") -> Finding:
    where = f"{scope.location}:{scope.line}" if scope.location else scope.group
    ev: tuple[Evidence, ...] = ()
    if f is not None:
        data = {"command": cmd, "path": f.entry, "index": f.index}
        ev = (Evidence(f"{where} PATH[{f.index}]", f.entry or "(empty)", data),)
    key = f"{scope.group}\0{f.entry if f else ''}\0{cmd}\0{msg if f is None else ''}"
    return Finding(rule, msg, ev, scope.group, scope.location, scope.line, key=key)


def _via(f: EntryFacts) -> str:
    if not f.symlinks:
        return ""
    return " (reached through " + ", ".join(f"{a} -> {b}" for a, b in f.symlinks) + ")"


Check = Callable[[Sequence[EntryFacts], LintSettings, Scope], Iterable[Finding]]


def check_empty(facts: Sequence[EntryFacts], s: LintSettings, sc: Scope) -> Iterable[Finding]:
    for f in facts:
        if f.entry == "":
            yield _finding(
                EMPTY, sc, f, f"PATH[{f.index}] is empty: it means the current directory"
            )


def check_relative(facts: Sequence[EntryFacts], s: LintSettings, sc: Scope) -> Iterable[Finding]:
    for f in facts:
        if f.entry and not f.entry.startswith("/"):
            kind = "the current directory" if f.entry in (".", "./") else "a relative entry"
            yield _finding(RELATIVE, sc, f, f"PATH[{f.index}] {f.entry!r} is {kind}")


def check_missing(facts: Sequence[EntryFacts], s: LintSettings, sc: Scope) -> Iterable[Finding]:
    for f in facts:
        if not f.entry.startswith("/"):
            continue
        if not f.exists:
            yield _finding(MISSING, sc, f, f"{f.entry} does not exist")
        elif not f.is_dir:
            yield _finding(MISSING, sc, f, f"{f.entry} is not a directory")


def check_temp(facts: Sequence[EntryFacts], s: LintSettings, sc: Scope) -> Iterable[Finding]:
    for f in facts:
        for t in s.temp_dirs:
            hit = next((p for p in (f.absolute, f.real) if p and under(p, t)), None)
            if hit and f.entry.startswith("/"):
                yield _finding(TEMP, sc, f, f"{f.entry} is in the temporary directory {t}{_via(f)}")
                break


def check_writable(facts: Sequence[EntryFacts], s: LintSettings, sc: Scope) -> Iterable[Finding]:
    for f in facts:
        if f.weak and f.entry.startswith("/"):
            why = "; ".join(f.weak)
            yield _finding(WRITABLE, sc, f, f"{f.entry} can be changed by others: {why}{_via(f)}")


def _first_system(facts: Sequence[EntryFacts], s: LintSettings) -> int:
    return next((f.index for f in facts if f.is_dir and s.system(f)), len(facts))


def check_project(facts: Sequence[EntryFacts], s: LintSettings, sc: Scope) -> Iterable[Finding]:
    first = _first_system(facts, s)
    for f in facts:
        if f.project and f.index < first and not s.trusted(f):
            ahead = "the system directories" if first < len(facts) else "any system directory"
            msg = f"{f.entry} ({f.project}) comes before {ahead}"
            yield _finding(PROJECT, sc, f, msg)


def check_shim(facts: Sequence[EntryFacts], s: LintSettings, sc: Scope) -> Iterable[Finding]:
    shims = {os.path.realpath(d): d for d in (s.shim_dir, *s.other_shim_dirs)}
    idx, found = next(
        (
            (f.index, shims[f.real or f.absolute])
            for f in facts
            if f.entry.startswith("/") and (f.real or f.absolute) in shims
        ),
        (None, s.shim_dir),
    )
    label = f"the shim directory {s.shim_dir} ({s.shim_source})"
    if found != s.shim_dir:
        label = f"the shim directory {found} (installed by mcpshim)"
    if idx is None:
        also = " nor is any other shim directory mcpshim installed" if s.other_shim_dirs else ""
        yield _finding(SHIM, sc, None, f"{label} is not on PATH{also}")
    elif idx != 0:
        before = ", ".join(f.entry or "(empty)" for f in facts[:idx])
        yield _finding(SHIM, sc, facts[idx], f"{label} is PATH[{idx}], after {before}")


def check_duplicates(facts: Sequence[EntryFacts], s: LintSettings, sc: Scope) -> Iterable[Finding]:
    seen: dict[str, int] = {}
    for f in facts:
        norm = f.entry.rstrip("/") or f.entry
        if not norm:
            continue  # empty entries have their own rule
        if norm in seen:
            msg = f"PATH[{f.index}] {f.entry or '(empty)'} repeats PATH[{seen[norm]}]"
            yield _finding(DUPLICATE, sc, f, msg)
        else:
            seen[norm] = f.index


@dataclass(frozen=True)
class Shadow:
    """Which file a bare command name runs, and the files it hides."""

    command: str
    winner: EntryFacts
    path: str
    hidden: tuple[str, ...]


def shadows(facts: Sequence[EntryFacts], commands: Iterable[str]) -> list[Shadow]:
    """For each command found, the winning file and the other files (not mere aliases) it hides."""
    out = []
    for cmd in commands:
        hits = [f for f in facts if cmd in f.executables]
        if hits:
            win = hits[0]
            same = win.exe_real[cmd]
            hidden: dict[str, str] = {}  # real file -> first path that reaches it
            for f in hits[1:]:
                if f.exe_real[cmd] != same:
                    hidden.setdefault(f.exe_real[cmd], f.executables[cmd])
            out.append(Shadow(cmd, win, win.executables[cmd], tuple(hidden.values())))
    return out


def check_shadowing(facts: Sequence[EntryFacts], s: LintSettings, sc: Scope) -> Iterable[Finding]:
    for sh in shadows(facts, s.sensitive_commands):
        if s.trusted(sh.winner):
            continue
        hides = f", hiding {', '.join(sh.hidden)}" if sh.hidden else ""
        msg = f"{sh.command} resolves to {sh.path} (not a trusted directory){hides}"
        yield _finding(SHADOWED, sc, sh.winner, msg, sh.command)


PATH_RULES: tuple[Check, ...] = (
    check_empty,
    check_relative,
    check_missing,
    check_temp,
    check_writable,
    check_project,
    check_shim,
    check_duplicates,
    check_shadowing,
)


def lint_facts(facts: Sequence[EntryFacts], s: LintSettings, scope: Scope) -> list[Finding]:
    return [finding for rule in PATH_RULES for finding in rule(facts, s, scope)]


def lint_path(
    value: str, s: LintSettings, scope: Scope, cwd: str | None = None
) -> tuple[list[Finding], tuple[EntryFacts, ...]]:
    """Probe each entry of a PATH string, then run every PATH rule over the facts."""
    facts = probe(split_path(value), s.sensitive_commands, s.owners, cwd or os.getcwd())
    return lint_facts(facts, s, scope), facts
