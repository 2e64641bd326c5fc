"""Why a shimmed command ran without its shim, from the evidence the log holds.

An exec that missed its shim either named its program by path (argv[0] holds a '/') or
looked it up through a PATH on which the shim directory was not first. The trace records
the PATH each exec passed (trace.parse keeps PATH and nothing else of the environment) and
the sampler the PATH of each process it saw, so the cause is read, not guessed: the PATH
the exec received, and which ancestor handed on a PATH without the shim directory (the
nearest one whose own PATH still had it first). That ancestor is described from its argv:
a login shell (which reads /etc/profile or zprofile whatever the environment says), `env
-i` or `env PATH=...`, a `PATH=` assignment in a composed `-c` line, or a program that
spawned it with an environment of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from mcpshim.base.display import quote_argv

__all__ = [
    "CAUSES",
    "SHELLS",
    "Cause",
    "Exec",
    "Lineage",
    "explain",
    "path_class",
    "shell_options",
]

SHELLS = frozenset({"sh", "dash", "bash", "zsh", "ksh", "mksh", "ash", "busybox"})

#: cause kind -> how the coverage line counts it
CAUSES = {
    "absolute-path": "by absolute path",
    "path-without-shim-dir": "with the shim dir missing from PATH",
    "no-path": "with no PATH at all",
    "shim-dir-not-first": "with the shim dir behind another directory in PATH",
    "not-looked-up": "not looked up through PATH (the shim dir was first)",
    "unknown": "for a reason not on record (its PATH was not recorded)",
}


@dataclass(frozen=True, slots=True)
class Exec:
    """One exec as the cause analysis needs it (from a trace-exec or observed record)."""

    boot: str
    pid: int
    start: int | None
    ppid: int | None
    parent_start: int | None
    time: float  # UTC seconds; 0.0 when unknown
    filename: bytes
    argv: tuple[bytes, ...]
    path: bytes | None  # the PATH it received
    path_known: bool  # False: not recorded (old records, the sampler could not read it)
    name: str = ""  # the command it ran as, where its file's name says otherwise

    @property
    def command(self) -> str:
        if self.name:
            return self.name
        return os.path.basename(self.filename or (self.argv[0] if self.argv else b"")).decode(
            "utf-8", "replace"
        )


@dataclass(frozen=True)
class Cause:
    kind: str  # a key of CAUSES
    detail: str  # the sentence a finding shows
    changer: Exec | None = None  # the ancestor that handed on the PATH, when found


def path_class(e: Exec, shim_dirs: Sequence[bytes]) -> str:
    """unknown | none (no PATH) | first | later | missing, for the shim dir in e's PATH."""
    if not e.path_known:
        return "unknown"
    if e.path is None:
        return "none"
    entries = e.path.split(b":")
    if entries and entries[0] in shim_dirs:
        return "first"
    return "later" if any(p in shim_dirs for p in entries) else "missing"


class Lineage:
    """Ancestors of an exec among the execs on record: earlier images of its process, then
    its parent's images from before the fork, and so on up."""

    def __init__(self, execs: Iterable[Exec]) -> None:
        self._procs: dict[tuple[str, int], list[list[Exec]]] = {}
        for e in sorted(execs, key=lambda x: x.time):
            runs = self._procs.setdefault((e.boot, e.pid), [])
            same = next((r for r in runs if _close(r[0].start, e.start)), None)
            if same is None:
                runs.append([e])
            else:
                same.append(e)

    def _process(self, boot: str, pid: int, start: int | None) -> list[Exec] | None:
        runs = self._procs.get((boot, pid), [])
        if start is None:
            return runs[-1] if runs else None
        return next((r for r in runs if _close(r[0].start, start)), None)

    def parent_exec(self, e: Exec) -> Exec | None:
        """What e's parent process was running when it forked e's process (the program a
        fork starts with), when that is on record and e is its process's first exec."""
        proc = self._process(e.boot, e.pid, e.start) or [e]
        if any(x.time < e.time for x in proc) or e.ppid is None:
            return None
        parent = self._process(e.boot, e.ppid, e.parent_start)
        before = [x for x in parent or () if x.time <= e.time]
        return before[-1] if before else None

    def ancestors(self, e: Exec, limit: int = 64) -> Iterator[Exec]:
        proc = self._process(e.boot, e.pid, e.start) or [e]
        mine = [x for x in proc if x.time < e.time or (x.time == e.time and x is not e)]
        first = mine[0] if mine else e
        yield from reversed(mine)
        for _ in range(limit):
            if first.ppid is None:
                return
            parent = self._process(first.boot, first.ppid, first.parent_start)
            if parent is None:
                return
            older = [x for x in parent if x.time <= first.time] or parent[:1]
            yield from reversed(older)
            first = older[0]


def _close(a: int | None, b: int | None) -> bool:
    return a is None or b is None or abs(a - b) <= 1


def shell_options(argv: Sequence[bytes]) -> tuple[bool, bool, bytes | None]:
    """(login, interactive, the -c command line) of a shell's argv."""
    login = bool(argv) and os.path.basename(argv[0]).startswith(b"-")
    interactive = False
    wants_line = False
    skip = False
    for a in argv[1:]:
        if skip:
            skip = False
            continue
        if a == b"--":
            break
        if a in (b"--login", b"-l"):
            login = True
        elif a in (b"-o", b"+o", b"-O", b"+O"):
            skip = True
        elif a.startswith(b"--"):
            continue
        elif a.startswith(b"-") and len(a) > 1:
            login |= b"l" in a
            interactive |= b"i" in a
            wants_line |= b"c" in a
        elif a.startswith(b"+"):
            continue
        else:
            return login, interactive, a if wants_line else None
    return login, interactive, None


_ASSIGNS = (b"PATH=", b"path=(", b"export PATH", b"typeset -x PATH")


def _describe(a: Exec, zdotdir_on: bool) -> str:
    """Who handed on a PATH without the shim dir first, and how, from ancestor a's argv."""
    name = a.command
    who = f"pid {a.pid}: {quote_argv(a.argv)}"
    args = a.argv[1:]
    if name == "env":
        if any(x in (b"-i", b"--ignore-environment", b"-") for x in args):
            return f"env -i gave it an empty environment ({who})"
        if any(x.startswith(b"PATH=") for x in args):
            return f"env set its PATH ({who})"
        if any(x in (b"-u", b"--unset=PATH") or x.startswith(b"-uPATH") for x in args):
            return f"env -u PATH removed its PATH ({who})"
    if name in SHELLS:
        login, interactive, line = shell_options(a.argv)
        if line is not None and any(s in line for s in _ASSIGNS):
            return f"a PATH assignment in a shell's command line ({who})"
        if name == "zsh" and (login or interactive):
            files = "/etc/zprofile (macOS: path_helper), /etc/zsh/zprofile or ~/.zprofile"
            route = "" if zdotdir_on else "; mcpshim's ZDOTDIR route was off (--no-zdotdir)"
            return f"a zsh login shell reset PATH in {files}{route} ({who})"
        if name == "zsh":
            return f"zsh reset PATH in /etc/zshenv or ~/.zshenv ({who})"
        if login:
            files = "/etc/profile, ~/.bash_profile, ~/.bash_login or ~/.profile"
            if name != "bash":
                files = "/etc/profile or ~/.profile"
            return (
                f"a {name} login shell reset PATH in {files}, which it reads whatever the "
                f"environment says ({who})"
            )
        if interactive:
            return f"an interactive {name} reset PATH in its rc file ({who})"
        return f"{name} set another PATH (a file named by ENV or BASH_ENV?) ({who})"
    return f"{name} started it with a PATH of its own, an explicit environment ({who})"


def explain(
    e: Exec, lineage: Lineage, shim_dirs: Sequence[bytes], zdotdir_on: bool = True
) -> Cause:
    """Why `e`, an exec of a shimmed command, did not go through its shim."""
    argv0 = e.argv[0] if e.argv else e.filename
    target = e.filename.decode("utf-8", "replace")
    if b"/" in argv0:
        up = lineage.parent_exec(e)
        if up is not None and _same_file(up.filename, e.filename):
            again = f"its parent's own program run again by absolute path ({quote_argv([argv0])})"
            return Cause("itself", f"{again}: {e.command} running itself")
        return Cause("absolute-path", f"called by absolute path ({quote_argv([argv0])})")
    cls = path_class(e, shim_dirs)
    if cls == "unknown":
        return Cause("unknown", "its PATH was not recorded (a sampled process, or no trace)")
    if cls == "first":
        return Cause(
            "not-looked-up",
            f"its PATH had the shim dir first, but it ran {target} without looking "
            f"{quote_argv([argv0])} up there (a path named directly, or a shell's cached lookup)",
        )
    changer = _changer(e, lineage, shim_dirs)
    how = _describe(changer[0], zdotdir_on) if changer else "no ancestor on record had it first"
    who = changer[0] if changer else None
    if cls == "none":
        return Cause("no-path", f"it received no PATH at all; {how}", who)
    if cls == "later":
        d = os.path.dirname(target)
        return Cause("shim-dir-not-first", f"its PATH had {d} before the shim dir; {how}", who)
    return Cause("path-without-shim-dir", f"its PATH did not hold the shim dir; {how}", who)


def _same_file(a: bytes, b: bytes) -> bool:
    """One program: the same path, or one file under two spellings (/bin and /usr/bin)."""
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _changer(e: Exec, lineage: Lineage, shim_dirs: Sequence[bytes]) -> tuple[Exec, Exec] | None:
    """(the nearest ancestor whose PATH had the shim dir first, the exec below it)."""
    below = e
    for a in lineage.ancestors(e):
        cls = path_class(a, shim_dirs)
        if cls == "first":
            return a, below
        if cls == "unknown":
            return None
        below = a
    return None


def shim_dirs_of(dirs: Iterable[str]) -> tuple[bytes, ...]:
    out: dict[bytes, None] = {}
    for d in dirs:
        if d:
            out[os.fsencode(d)] = None
            out[os.fsencode(os.path.realpath(d))] = None
    return tuple(out)


def session_shim_dir(start: Mapping[str, object] | None) -> str:
    """The shim dir a session ran with: `run` puts it first on the command's PATH."""
    path = start.get("path") if start else None
    return path.split(":", 1)[0] if isinstance(path, str) else ""
