"""What the filesystem says about each PATH entry, gathered once for the pure PATH rules.

Writability is judged on every directory the kernel looks a name up in while resolving an
entry, symlink targets included: whoever can rename or replace any of those components can
make the entry mean another directory. The final directory's own mode matters more: anyone
who can write it can add a `git` there.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Chain", "EntryFacts", "ProcessPath", "probe", "process_path", "under", "walk"]

_MAX_LINKS = 40


def under(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")


@dataclass(frozen=True)
class Chain:
    """How a path resolves: each (directory, name) looked up, each symlink followed."""

    lookups: tuple[tuple[str, str], ...]
    symlinks: tuple[tuple[str, str], ...]
    real: str | None  # None when a component is missing or a loop was hit
    problem: str = ""


def walk(path: str) -> Chain:
    """Resolve an absolute path one component at a time, as the kernel does."""
    lookups: list[tuple[str, str]] = []
    links: list[tuple[str, str]] = []
    todo = [c for c in path.split("/") if c]
    todo.reverse()
    cur = "/"
    followed = 0
    while todo:
        comp = todo.pop()
        if comp == ".":
            continue
        if comp == "..":
            cur = os.path.dirname(cur) or "/"
            continue
        lookups.append((cur, comp))
        nxt = os.path.join(cur, comp)
        try:
            st = os.lstat(nxt)
        except OSError:
            return Chain(tuple(lookups), tuple(links), None, f"{nxt} does not exist")
        if stat.S_ISLNK(st.st_mode):
            followed += 1
            if followed > _MAX_LINKS:
                return Chain(tuple(lookups), tuple(links), None, "too many symlinks")
            target = os.readlink(nxt)
            links.append((nxt, target))
            if target.startswith("/"):
                cur = "/"
            todo.extend(reversed([c for c in target.split("/") if c]))
            continue
        cur = nxt
    return Chain(tuple(lookups), tuple(links), cur)


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _private_group(st: os.stat_result) -> bool:
    """A user-private group (umask 002 setups): named after the owner, no other members."""
    try:
        g = grp.getgrgid(st.st_gid)
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        return False
    return g.gr_name == owner and set(g.gr_mem) <= {owner}


def _mode(st: os.stat_result) -> str:
    return f"{stat.S_IMODE(st.st_mode):04o}"


def weaknesses(chain: Chain, final: str | None, owners: frozenset[int]) -> tuple[str, ...]:
    """Why someone other than root or the process's user could change what the entry means."""
    out: list[str] = []
    for d, child in chain.lookups:
        try:
            st = os.stat(d)
        except OSError:
            continue
        if st.st_uid not in owners:
            out.append(f"{d} is owned by {_user(st.st_uid)}")
            continue
        writable = st.st_mode & stat.S_IWOTH or (
            st.st_mode & stat.S_IWGRP and not _private_group(st)
        )
        if not writable:
            continue
        try:
            child_uid: int | None = os.lstat(os.path.join(d, child)).st_uid
        except OSError:
            child_uid = None
        if st.st_mode & stat.S_ISVTX and child_uid in owners:
            continue  # sticky: others cannot rename or replace a component they do not own
        who = "world" if st.st_mode & stat.S_IWOTH else "group"
        what = "missing, so anyone who can write there can create it" if child_uid is None else ""
        out.append(
            f"{d} is {who}-writable (mode {_mode(st)})"
            + (f" and {child} is {what}" if what else f" and holds {child}")
        )
    if final is not None:
        try:
            st = os.stat(final)
        except OSError:
            return tuple(out)
        if st.st_uid not in owners:
            out.append(f"{final} is owned by {_user(st.st_uid)}")
        elif st.st_mode & stat.S_IWOTH:
            out.append(f"{final} is world-writable (mode {_mode(st)})")
        elif st.st_mode & stat.S_IWGRP and not _private_group(st):
            group = st.st_gid
            try:
                gname = grp.getgrgid(group).gr_name
            except KeyError:
                gname = f"gid {group}"
            out.append(f"{final} is group-writable by {gname} (mode {_mode(st)})")
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class EntryFacts:
    """One PATH entry and the facts the rules need; no rule touches the filesystem."""

    index: int
    entry: str
    absolute: str  # the entry made absolute against the cwd the process had (for facts)
    exists: bool
    is_dir: bool
    real: str | None
    symlinks: tuple[tuple[str, str], ...] = ()
    weak: tuple[str, ...] = ()
    executables: Mapping[str, str] = field(default_factory=dict)  # command -> file here
    exe_real: Mapping[str, str] = field(default_factory=dict)  # command -> its real file
    project: str = ""  # node_modules/.bin | virtualenv | checkout bin, when it is one


def _project_kind(path: str) -> str:
    parts = path.rstrip("/").split("/")
    if len(parts) >= 2 and parts[-2:] == ["node_modules", ".bin"]:
        return "node_modules/.bin"
    parent = os.path.dirname(path.rstrip("/"))
    if parts[-1] in ("bin", "Scripts") and os.path.isfile(os.path.join(parent, "pyvenv.cfg")):
        return "virtualenv bin"
    if parts[-1] != "bin":
        return ""
    d = parent
    while d and d != "/":
        if os.path.exists(os.path.join(d, ".git")):
            # A hidden checkout (~/.pyenv, ~/.rbenv) is a tool install, not a workspace.
            if os.path.basename(d).startswith(".") or not os.access(path, os.W_OK):
                return ""
            return f"bin inside the writable checkout {d}"
        d = os.path.dirname(d)
    return ""


def probe(
    entries: Iterable[str], commands: Iterable[str], owners: frozenset[int], cwd: str
) -> tuple[EntryFacts, ...]:
    """Gather the facts for each entry (stat, symlink chain, sensitive executables)."""
    names = tuple(commands)
    out: list[EntryFacts] = []
    for i, entry in enumerate(entries):
        # Drop "." and "//" but keep "..": "link/.." means the link's target's parent.
        parts = [c for c in os.path.join(cwd, entry).split("/") if c not in ("", ".")]
        absolute = "/" + "/".join(parts)
        chain = walk(absolute)
        real = chain.real
        is_dir = real is not None and os.path.isdir(real)
        exe: dict[str, str] = {}
        exe_real: dict[str, str] = {}
        if is_dir:
            for n in names:
                cand = os.path.join(absolute, n)
                if os.path.isfile(cand) and os.access(cand, os.X_OK):
                    exe[n] = cand
                exe_real[n] = os.path.realpath(cand)
        out.append(
            EntryFacts(
                index=i,
                entry=entry,
                absolute=absolute,
                exists=real is not None,
                is_dir=is_dir,
                real=real,
                symlinks=chain.symlinks,
                weak=weaknesses(chain, real if is_dir else None, owners),
                executables=exe,
                exe_real=exe_real,
                project=_project_kind(real or absolute) if is_dir else "",
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class ProcessPath:
    """The PATH a running process has (None when unset), its cwd and its effective uid."""

    pid: int
    path: str | None
    cwd: str | None
    uid: int


def process_path(pid: int, proc: str = "/proc") -> ProcessPath:
    """Read /proc/PID/environ: the environment the process was started with (Linux only)."""
    from mcpshim.errors import InputError, UsageError

    base = os.path.join(proc, str(pid))
    if not os.path.isdir(proc) or not os.path.exists(os.path.join(proc, "self", "environ")):
        raise UsageError("--pid needs Linux /proc/PID/environ, which this system does not have")
    try:
        with open(os.path.join(base, "environ"), "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise InputError(f"no process {pid} (no {base})") from None
    except PermissionError:
        raise InputError(
            f"cannot read {base}/environ: permission denied (process {pid} belongs to another "
            "user; run lint-path as that user or as root)"
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read {base}/environ: {exc.strerror}") from None
    value = None
    for item in raw.split(b"\0"):
        if item.startswith(b"PATH="):
            value = os.fsdecode(item[5:])
            break  # getenv() takes the first one
    try:
        cwd: str | None = os.readlink(os.path.join(base, "cwd"))
    except OSError:
        cwd = None
    uid = os.stat(base).st_uid
    try:
        with open(os.path.join(base, "status"), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    uid = int(line.split()[2])  # real, effective, saved, fs
    except OSError:
        pass
    return ProcessPath(pid, value, cwd, uid)
