"""The one table of file locations that matter: credential files (reading one is a finding),
places that run later without being asked (writing one is) and the project's configuration
files (a program a process starts after reading one may be what the file chose). The tracer
matches each open, write, rename and mode change against it as it writes its records, `run
--contain` refuses reading the credential files a lock does not list, and a policy adds to
it (`[files] credentials` and `persistence`, the same pattern syntax).

The table is data, `file_table.toml` beside this module, documented there: each entry has
a label, `paths` and `exclude` patterns (`~`, `{config}`, `{data}`, `{workspace}`; `*`
within a component, `**` across components), `private_key` (a read is high) and `not_by`
(programs whose own writes there are judged by their arguments instead: git writing its
configuration). A directory on the server's PATH is a place that runs later too: `FileTable`
takes the PATH's absolute directories (the shims' left out).
"""

from __future__ import annotations

import functools
import glob
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "CREDENTIAL",
    "PERSISTENCE",
    "PROJECT",
    "Entry",
    "FileTable",
    "Place",
    "Roots",
    "entries",
    "pattern_regex",
]

CREDENTIAL, PERSISTENCE, PROJECT = "credential", "persistence", "project"
_TABLE = Path(__file__).with_name("file_table.toml")
ON_PATH = "a directory on PATH"


@dataclass(frozen=True)
class Place:
    """What a path is: its kind (credential, persistence), the entry's label, and whether
    reading it reads a private key."""

    kind: str
    label: str
    private_key: bool = False


@dataclass(frozen=True)
class Entry:
    kind: str
    label: str
    paths: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    private_key: bool = False
    not_by: tuple[str, ...] = ()


@functools.cache
def _shipped() -> tuple[Entry, ...]:
    doc = tomllib.loads(_TABLE.read_text(encoding="utf-8"))
    out: list[Entry] = []
    for kind in (CREDENTIAL, PERSISTENCE, PROJECT):
        for e in doc.get(kind, []):
            out.append(Entry(kind, str(e["label"]), tuple(e["paths"]),
                             tuple(e.get("exclude", ())), bool(e.get("private_key", False)),
                             tuple(e.get("not_by", ()))))  # fmt: skip
    return tuple(out)


def entries(credentials: Iterable[str] = (), persistence: Iterable[str] = ()) -> tuple[Entry, ...]:
    """The shipped table, plus a policy's own credential and persistence patterns."""
    extra = []
    if creds := tuple(credentials):
        extra.append(Entry(CREDENTIAL, "credential file (policy)", creds))
    if places := tuple(persistence):
        extra.append(Entry(PERSISTENCE, "runs later (policy)", places))
    return _shipped() + tuple(extra)


@dataclass(frozen=True)
class Roots:
    """What the placeholders stand for in one session."""

    homes: tuple[str, ...]
    workspace: str | None = None
    config: str | None = None  # $XDG_CONFIG_HOME
    data: str | None = None  # $XDG_DATA_HOME
    path_dirs: tuple[str, ...] = ()  # the server's PATH, absolute entries, no shim dir

    @classmethod
    def of(cls, env: dict[str, str] | os._Environ[str], workspace: str | None,
           path_dirs: Sequence[str] = ()) -> Roots:  # fmt: skip
        """From an environment: its HOME and the user's home in the password database."""
        homes = [env["HOME"]] if env.get("HOME", "").startswith("/") else []
        try:
            import pwd

            homes.append(pwd.getpwuid(os.getuid()).pw_dir)
        except (ImportError, KeyError):
            pass
        config, data = env.get("XDG_CONFIG_HOME"), env.get("XDG_DATA_HOME")
        return cls(
            tuple(dict.fromkeys(os.path.normpath(h) for h in homes if h.startswith("/"))),
            workspace,
            config if config and config.startswith("/") else None,
            data if data and data.startswith("/") else None,
            tuple(dict.fromkeys(os.path.normpath(d) for d in path_dirs if d.startswith("/"))),
        )

    def to_json(self) -> dict[str, Any]:
        return {"homes": list(self.homes), "workspace": self.workspace, "config": self.config,
                "data": self.data, "path_dirs": list(self.path_dirs)}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Roots:
        return cls(tuple(d["homes"]), d["workspace"], d["config"], d["data"],
                   tuple(d["path_dirs"]))  # fmt: skip

    def expand(self, pattern: str) -> list[str]:
        """The pattern with its placeholders replaced, once per home ([] if one is unknown)."""
        out = []
        for home in self.homes or ("",):
            p = pattern
            if p.startswith("~/") or p == "~":
                if not home:
                    continue
                p = home + p[1:]
            for name, value in (("{config}", self.config or (home and f"{home}/.config")),
                                ("{data}", self.data or (home and f"{home}/.local/share")),
                                ("{workspace}", self.workspace)):  # fmt: skip
                if name in p:
                    if not value:
                        break
                    p = p.replace(name, value.rstrip("/") or "/")
            else:
                out.append(os.path.normpath(p) if "**" not in p else p)
        return list(dict.fromkeys(out))


_TOKENS = re.compile(r"(/\*\*/|/\*\*\Z|\*|\?)")
_MEANS = {"/**/": "(?:/[^/]+)*/", "/**": "(?:/.*)?", "*": "[^/]*", "?": "[^/]"}


def pattern_regex(pattern: str) -> str:
    """A pattern (placeholders expanded) as a regular expression over a whole path: `*`
    and `?` within a component, `/**/` any components between, a trailing `/**` beneath."""
    return "".join(_MEANS.get(part) or re.escape(part) for part in _TOKENS.split(pattern))


def _union(patterns: Sequence[str]) -> re.Pattern[str]:
    return re.compile("(?:" + "|".join(f"(?:{pattern_regex(p)})" for p in patterns) + r")\Z")


@dataclass(frozen=True)
class _Compiled:
    entry: Entry
    match: re.Pattern[str]
    exclude: re.Pattern[str] | None
    heads: tuple[str, ...]  # the literal starts of its patterns (a leading `/**/`: none)
    inner: tuple[str, ...]  # what follows a leading `/**/`
    tails: tuple[str, ...]  # the literal ends of its patterns; () when one has none

    def may_match(self, text: str) -> bool:
        """A path none of its patterns can match fails here, with no regular expression."""
        if self.tails and not text.endswith(self.tails):
            return False
        return text.startswith(self.heads) or any(i in text for i in self.inner)


def _compiled(e: Entry, pats: Sequence[str], excl: Sequence[str]) -> _Compiled:
    heads, inner, tails = [], [], []
    for p in pats:
        if p.startswith("/**/"):
            inner.append(re.split(r"[*?]", p[3:], maxsplit=1)[0])
        else:
            heads.append(re.split(r"[*?]", p, maxsplit=1)[0])
        tails.append(re.split(r"[*?]", p)[-1])
    ex = _union(excl) if excl else None
    ends = tuple(tails) if all(tails) else ()
    return _Compiled(e, _union(pats), ex, tuple(heads), tuple(inner), ends)


@dataclass
class FileTable:
    """The table for one session (its roots), compiled once; each question costs a regular
    expression match or two."""

    roots: Roots
    table: tuple[Entry, ...] = field(default_factory=entries)

    def __post_init__(self) -> None:
        kinds = (CREDENTIAL, PERSISTENCE, PROJECT)
        self._by_kind: dict[str, list[_Compiled]] = {k: [] for k in kinds}
        #: per kind, the literal start of every pattern, and what follows a leading `/**/`:
        #: a path that has neither cannot match (most opens are asked no regular expression)
        self._heads: dict[str, set[str]] = {k: set() for k in kinds}
        self._inner: dict[str, set[str]] = {k: set() for k in kinds}
        table = list(self.table)
        if self.roots.workspace in (None, "/", *self.roots.homes):
            table = [e for e in table if e.kind != PROJECT]  # a home or / is no project
        if self.roots.path_dirs:
            table.append(Entry(PERSISTENCE, ON_PATH, tuple(f"{d}/*" for d in self.roots.path_dirs)))
        for e in table:
            pats = [p for pat in e.paths for p in self.roots.expand(pat)]
            excl = [p for pat in e.exclude for p in self.roots.expand(pat)]
            if not pats:
                continue
            c = _compiled(e, pats, excl)
            self._by_kind[e.kind].append(c)
            self._heads[e.kind].update(c.heads)
            self._inner[e.kind].update(c.inner)
        self._starts = {k: tuple(v) for k, v in self._heads.items()}

    def _find(self, kind: str, path: bytes | str, program: str = "") -> Place | None:
        text = path if isinstance(path, str) else path.decode("utf-8", "surrogateescape")
        if not text.startswith("/"):
            return None
        if "/." in text or "//" in text:
            text = os.path.normpath(text)
        if not text.startswith(self._starts[kind]) and not any(
            i in text for i in self._inner[kind]
        ):
            return None
        for c in self._by_kind[kind]:
            if not c.may_match(text) or not c.match.match(text):
                continue
            if not (c.exclude is not None and c.exclude.match(text)):
                if program and program in c.entry.not_by:
                    continue
                return Place(kind, c.entry.label, c.entry.private_key)
        return None

    def credential(self, path: bytes | str) -> Place | None:
        """The credential entry this absolute path is in, if any."""
        return self._find(CREDENTIAL, path)

    def persistence(self, path: bytes | str, program: str = "") -> Place | None:
        """The place that runs later this absolute path is in, if any (`program`: the
        writer's name, for the entries whose own program's writes do not count)."""
        return self._find(PERSISTENCE, path, program)

    def project(self, path: bytes | str) -> Place | None:
        """The project configuration entry this absolute path is in, if any (a file of the
        workspace a program may take its commands from)."""
        return self._find(PROJECT, path)

    def credential_files(
        self, depth: int = 4, workspace: bool = True
    ) -> Iterator[tuple[str, Place]]:
        """Each credential file (or directory of them) on this machine now: the patterns
        expanded on disk (`workspace`: the workspace's too). `**` is followed `depth`
        directories deep, not into .git, node_modules or a virtualenv (what `run
        --contain` refuses reading is what is here when it starts)."""
        seen: set[str] = set()
        for c in self._by_kind[CREDENTIAL]:
            raw = [p for p in c.entry.paths if workspace or "{workspace}" not in p]
            for pattern in (x for r in raw for x in self.roots.expand(r)):
                for found in _glob(pattern, depth):
                    if found in seen or (c.exclude is not None and c.exclude.match(found)):
                        continue
                    seen.add(found)
                    yield found, Place(CREDENTIAL, c.entry.label, c.entry.private_key)


_SKIP = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__"})


def _glob(pattern: str, depth: int) -> Iterator[str]:
    """What a pattern names on disk: `dir/**` is the directory itself (everything beneath
    it is the credential), `**/` in the middle walks at most `depth` levels."""
    if pattern.endswith("/**"):
        base = pattern[:-3]
        if "*" not in base and "?" not in base:
            if os.path.isdir(base):
                yield os.path.normpath(base)
            return
        pattern = base
    if "/**/" not in pattern:
        yield from (os.path.normpath(p) for p in glob.glob(pattern) if os.path.exists(p))
        return
    head, _, tail = pattern.partition("/**/")
    for top in glob.glob(head) if any(c in head for c in "*?") else [head]:
        for dirpath, dirs, _files in os.walk(top):
            dirs[:] = [d for d in dirs if d not in _SKIP]
            if dirpath.count("/") - top.count("/") >= depth:
                dirs[:] = []
            here = glob.glob(os.path.join(glob.escape(dirpath), tail))
            yield from (os.path.normpath(p) for p in here)
