"""Where shim targets may come from: a trusted search path, never a temp or writable dir."""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:  # (`run` checks strace's place here before its server starts)
    from collections.abc import Iterable
    from pathlib import Path

__all__ = [
    "SHELL_NAMES",
    "default_interpreter",
    "file_digest",
    "gettempdir",
    "known_shells",
    "resolve_target",
    "temp_dirs",
    "trusted_search_path",
    "unsafe_reason",
]


# ---- where targets may come from ---------------------------------------------------------


def trusted_search_path() -> list[str]:
    """The system default path (confstr CS_PATH) plus /usr/local/bin and /opt/homebrew/bin."""
    try:
        cs = os.confstr("CS_PATH") or ""
    except (ValueError, OSError, AttributeError):
        cs = ""
    dirs = [d for d in (cs or "/usr/bin:/bin").split(":") if d]
    for extra in ("/usr/local/bin", "/opt/homebrew/bin"):
        if extra not in dirs:
            dirs.append(extra)
    return dirs


def temp_dirs() -> list[str]:
    dirs = ["/tmp", "/var/tmp", "/dev/shm", "/private/tmp", "/private/var/folders"]
    for d in (os.environ.get("TMPDIR"), gettempdir()):
        if d and d not in dirs:
            dirs.append(d.rstrip("/") or "/")
    return [os.path.realpath(d) for d in dirs] + dirs


def gettempdir() -> str:
    """tempfile.gettempdir()'s answer on POSIX (a test holds the two to it): the first of
    $TMPDIR, $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp and the working directory where a new
    file can be written. tempfile loads shutil and re, 16 ms, and `run` checks strace's
    place before its server starts."""
    candidates = [d for d in (os.environ.get(v) for v in ("TMPDIR", "TEMP", "TMP")) if d]
    candidates += ["/tmp", "/var/tmp", "/usr/tmp"]
    try:
        candidates.append(os.getcwd())
    except OSError:
        candidates.append(os.curdir)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for given in candidates:
        d = given if given == os.curdir else os.path.abspath(given)
        for _ in range(100):
            name = os.path.join(d, "tmp" + os.urandom(6).hex())
            try:
                fd = os.open(name, flags, 0o600)
                try:
                    try:
                        os.write(fd, b"blat")
                    finally:
                        os.close(fd)
                finally:
                    os.unlink(name)
                return d
            except FileExistsError:
                continue
            except OSError:
                break
    raise FileNotFoundError(f"no usable temporary directory in {candidates}")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def unsafe_reason(path: str) -> str | None:
    """Why a target path should not be trusted, or None."""
    real = os.path.realpath(path)
    for p in {path, real}:
        for t in temp_dirs():
            if _under(p, t):
                return f"{p} is in a temporary directory ({t})"
        parent = os.path.dirname(p)
        st = os.stat(parent)
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{parent} is group- or world-writable"
    st = os.stat(real)
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{real} itself is group- or world-writable"
    return None


def resolve_target(name: str, search: Iterable[str], shim_dir: Path) -> str | None:
    """The first `name` on the trusted search path, spelled through a directory that is not
    a link to another one on it (merged /usr: /bin/git is pinned as /usr/bin/git, the
    spelling `policy init` and /proc use, so one file has one name everywhere)."""
    shim_real = os.path.realpath(shim_dir)
    dirs = list(search)
    for d in dirs:
        cand = os.path.join(d, name)
        real_dir = os.path.realpath(d)
        if os.path.isfile(cand) and os.access(cand, os.X_OK) and real_dir != shim_real:
            if real_dir != d and real_dir in dirs:
                return os.path.join(real_dir, name)
            return cand
    return None


def file_digest(path: str) -> tuple[str, int]:
    import hashlib

    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size


SHELL_NAMES = ("sh", "dash", "bash", "zsh", "ksh", "mksh", "ash", "busybox")


def known_shells() -> list[str]:
    """Shell executables on the trusted path: a child of one may carry its parent's line."""
    found: dict[str, str] = {}
    for d in trusted_search_path():
        for name in SHELL_NAMES:
            p = os.path.join(d, name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                found.setdefault(os.path.realpath(p), p)
    return sorted(found.values())


def default_interpreter() -> str:
    """dash when present (fastest to start), else /bin/sh."""
    for cand in ("/usr/bin/dash", "/bin/dash"):
        if os.access(cand, os.X_OK):
            return cand
    return "/bin/sh"
