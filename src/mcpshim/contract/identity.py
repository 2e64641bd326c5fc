"""Who an executable is: its content hash, and who vouches for it.

A path names a file, not a program: the same /usr/bin/node can be replaced by an update or
by an agent. An identity is the file's SHA-256 plus what vouches for it: the system package
that installed it (dpkg, or rpm, asked once for every path at a time: a session with a
thousand execs costs one dpkg-query, not a thousand) and, with dpkg, whether the file still
matches the checksum the package recorded; or, for a file no package owns, whether it sits
in a directory the server's user can write (where anyone running as that user, an agent
included, could have put it). Code signatures exist on macOS only; mcpshim does not read
them yet, so elsewhere than a package the answer is "unowned".

Identities are read from the disk when asked (approve, review, the departure watch), not
when the process ran: a file replaced since then shows its new identity.

A path in /proc names no file of its own: `/proc/self/exe` is, in whichever process reads
it, that process's executable (read here: mcpshim's interpreter). Such a path is never
read: its identity is none, and says why (the tracer names the file it was in the process
that ran it: trace.selfexe).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from mcpshim.contract.identitycache import IdentityCache, file_key

__all__ = [
    "PROC_WHY",
    "Identities",
    "Identity",
    "content_hash",
    "in_proc",
    "usr_aliases",
    "writable_by",
]

_TIMEOUT_S = 30.0
#: files up to this size are checked against the MD5 their package recorded; a larger one
#: (node is 100 MB: 0.5 s of MD5) is vouched for by its package without the check
CHECK_MAX = 32 << 20
_MERGED = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


@dataclass(frozen=True)
class Identity:
    path: str
    sha256: str  # "" when the file cannot be read
    vouched: str  # a package, or why nobody vouches
    owned: bool  # a system package owns it


#: why a /proc path has no identity
PROC_WHY = (
    "a /proc path: it names a different file in each process that reads it (the trace did "
    "not say which one it named in the process that ran it)"
)


def in_proc(path: str) -> bool:
    """Whether `path` is in /proc, where a path names what the reading process sees."""
    return os.path.normpath(path).startswith("/proc/")


def _hash(path: str, algorithm: str) -> str:
    """A file's digest; "" when it cannot be read (or is in /proc: never read)."""
    if in_proc(path):
        return ""
    h = hashlib.new(algorithm)
    try:
        with open(path, "rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)  # hashlib lets go of the interpreter lock: threads overlap
    except OSError:
        return ""
    return h.hexdigest()


def _small(path: str) -> bool:
    try:
        return os.path.getsize(path) <= CHECK_MAX
    except OSError:
        return False


def content_hash(path: str) -> str:
    return _hash(path, "sha256")


def usr_aliases(path: str) -> list[str]:
    """The path, its real path, and their twins on a merged /usr (/bin/sh is /usr/bin/sh):
    dpkg knows a file under the name its package shipped it as."""
    out = [path]
    real = os.path.realpath(path)
    for p in (path, real):
        for top in _MERGED:
            if p.startswith(top + "/"):
                out.append("/usr" + p)
            elif p.startswith("/usr" + top + "/"):
                out.append(p[4:])
        out.append(p)
    return list(dict.fromkeys(out))


def writable_by(directory: str, uid: int | None) -> bool:
    """Whether the user `uid` (None: this process's user) can write into `directory`."""
    if uid is None or uid == os.geteuid():
        return os.access(directory, os.W_OK)
    if uid == 0:
        return True
    try:
        st = os.stat(directory)
    except OSError:
        return False
    if st.st_mode & stat.S_IWOTH:
        return True
    return bool(st.st_uid == uid and st.st_mode & stat.S_IWUSR) or bool(st.st_mode & stat.S_IWGRP)


def _user(uid: int | None) -> str:
    if uid is None:
        uid = os.geteuid()
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False, errors="replace"
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout


class Identities:
    """Identity lookups, cached by path; `lookup` asks the package manager once per batch."""

    def __init__(self, uid: int | None = None, kept: Path | None = None) -> None:
        """`kept`: a file that remembers package-owned identities between commands
        (contract.identitycache; dpkg systems only)."""
        self.uid = uid
        self._cache: dict[str, Identity] = {}
        self.queries = 0  # package manager calls made (one per batch of new paths)
        self.hashed = 0  # files read and hashed (not found in `kept`)
        self._dpkg = shutil.which("dpkg-query")
        self._rpm = None if self._dpkg else shutil.which("rpm")
        self._kept = IdentityCache(kept if self._dpkg else None)

    def get(self, path: str) -> Identity:
        return self.lookup([path])[path]

    def lookup(self, paths: Iterable[str]) -> dict[str, Identity]:
        """Identities of `paths`: one package query for all the new ones, and their SHA-256
        and MD5 (what dpkg records) hashed at the same time, on every core (a 100 MB
        node binary takes 0.2 s for SHA-256 and 0.5 s for MD5 on its own)."""
        paths = list(paths)
        want = [p for p in dict.fromkeys(paths) if p not in self._cache and not self._recall(p)]
        if want:
            keys = {p: file_key(p) for p in want}
            self.hashed += len(want)
            with ThreadPoolExecutor(max_workers=(os.cpu_count() or 1) + 1) as pool:
                owners = pool.submit(self._owners, [p for p in want if not in_proc(p)])
                sha = {p: pool.submit(_hash, p, "sha256") for p in want}
                md5 = {p: pool.submit(_hash, p, "md5") for p in want if _small(p)}
                md5 = md5 if self._dpkg else {}
                for p in want:
                    m = md5[p].result() if p in md5 else ""
                    got = self._identity(p, sha[p].result(), m, owners.result().get(p))
                    self._cache[p] = got
                    if got.owned:
                        self._kept.put(p, keys[p], got.sha256, got.vouched)
            self._kept.save()
        return {p: self._cache[p] for p in paths}

    def _recall(self, path: str) -> bool:
        kept = self._kept.get(path)
        if kept is not None:
            self._cache[path] = Identity(path, kept[0], kept[1], True)
        return kept is not None

    def _identity(self, path: str, sha: str, md5: str, owner: tuple[str, str] | None) -> Identity:
        if in_proc(path):  # never read, never asked about (its real path is ours)
            return Identity(path, "", PROC_WHY, False)
        if owner is not None:
            pkg, version = owner
            vouched = f"{self._manager()} package {pkg} {version}".rstrip()
            check = self._dpkg_md5(pkg, path) if self._dpkg else None
            if check is not None and md5:
                vouched += (
                    ", content matches its recorded checksum"
                    if check == md5
                    else ", CONTENT DIFFERS from what the package installed"
                )
            elif check is not None:
                vouched += ", not checked against its recorded checksum (large file)"
            return Identity(path, sha, vouched, True)
        if not sha:
            return Identity(path, "", "unreadable now (gone, or not readable)", False)
        directory = os.path.dirname(path) or "/"
        if writable_by(directory, self.uid):
            why = f"unowned, in a directory {_user(self.uid)} can write ({directory})"
        else:
            why = "unowned (no system package installed it)"
        return Identity(path, sha, why, False)

    def _manager(self) -> str:
        return "dpkg" if self._dpkg else "rpm" if self._rpm else ""

    # -- package owners -----------------------------------------------------------------------

    def _owners(self, paths: list[str]) -> dict[str, tuple[str, str]]:
        if self._dpkg:
            return self._dpkg_owners(paths)
        if self._rpm:
            return self._rpm_owners(paths)
        return {}

    def _dpkg_owners(self, paths: list[str]) -> dict[str, tuple[str, str]]:
        alias: dict[str, list[str]] = {}
        for p in paths:
            for a in usr_aliases(p):
                if os.path.isabs(a):
                    alias.setdefault(a, []).append(p)
        self.queries += 1
        out = _run([self._dpkg or "dpkg-query", "-S", "--", *alias])
        pkg_of: dict[str, str] = {}
        for line in out.splitlines():
            if line.startswith("diversion by ") or ": " not in line:
                continue
            pkgs, _, name = line.partition(": ")
            for p in alias.get(name, ()):
                pkg_of.setdefault(p, pkgs.split(", ")[0].strip())
        if not pkg_of:
            return {}
        self.queries += 1
        versions: dict[str, str] = {}
        fmt = "${binary:Package}\t${Version}\n"
        for line in _run(
            [self._dpkg or "dpkg-query", "-W", "-f", fmt, *set(pkg_of.values())]
        ).splitlines():
            name, _, version = line.partition("\t")
            versions[name] = version
            versions.setdefault(name.split(":")[0], version)
        return {p: (pkg, versions.get(pkg, "")) for p, pkg in pkg_of.items()}

    def _dpkg_md5(self, pkg: str, path: str) -> str | None:
        """The MD5 dpkg recorded for this file when its package was installed, if any (a
        Multi-Arch package is named with its architecture, as its md5sums file is)."""
        names = {a.lstrip("/") for a in usr_aliases(path)}
        try:
            with open(
                f"/var/lib/dpkg/info/{pkg}.md5sums", encoding="utf-8", errors="replace"
            ) as fh:
                for line in fh:
                    md5, _, name = line.rstrip("\n").partition("  ")
                    if name in names:
                        return md5
        except OSError:
            return None
        return None

    def _rpm_owners(self, paths: list[str]) -> dict[str, tuple[str, str]]:  # pragma: no cover
        self.queries += 1
        fmt = "%{NAME}\t%{VERSION}-%{RELEASE}\n"
        out = _run([self._rpm or "rpm", "-qf", "--qf", fmt, *paths]).splitlines()
        result: dict[str, tuple[str, str]] = {}
        if len(out) != len(paths):
            return result  # a file owned by several packages: lines no longer pair up
        for p, line in zip(paths, out, strict=True):
            if "\t" in line and " " not in line.split("\t")[0]:
                name, _, version = line.partition("\t")
                result[p] = (name, version)
        return result
