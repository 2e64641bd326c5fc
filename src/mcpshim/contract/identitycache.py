"""Identities remembered between commands, for the files no command of the user can change.

Hashing is most of what `approve` costs: node alone is 99 MB of SHA-256, and one
`dpkg-query` reads the whole package database. A file's identity can only change when the
file does, and a change to a file moves its ctime, which no unprivileged process can set;
a package install rewrites dpkg's status file. So an identity is kept with the file's
(dev, ino, size, mtime_ns, ctime_ns) and the status file's, and reused while both stand.

Only files a system package owns are kept (the large ones: node, git, python); a file no
package owns is the kind an agent drops in, and is hashed every time, as is everything when
the status file cannot be read. The cache sits in the user's cache directory: whoever can
write it can write the lock approve writes, so it adds no way in. It is a cache: missing,
of another version or damaged in any byte (its first line is the digest of the rest), it
is ignored and written again; one that cannot be written costs the next command its time.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson

from mcpshim.base.fdio import read_regular
from mcpshim.base.safewrite import make_private_dir, write_file
from mcpshim.errors import InputError

__all__ = ["DPKG_STATUS", "IdentityCache", "file_key"]

VERSION = 1
DPKG_STATUS = "/var/lib/dpkg/status"
Key = list[int]


def file_key(path: str) -> Key | None:
    """What changes whenever a file's content can have: None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class IdentityCache:
    """Remembered (sha256, vouched) of package-owned files, valid under one dpkg status."""

    def __init__(self, path: Path | None, status: str = DPKG_STATUS) -> None:
        self.path = path
        self.status = file_key(status) if path is not None else None
        self._files: dict[str, Any] = self._load() if self.status is not None else {}
        self._dirty = False

    def get(self, path: str) -> tuple[str, str] | None:
        """The (sha256, vouched) kept for `path`, if the file is still the one it was."""
        e = self._files.get(path)
        if not isinstance(e, dict) or e.get("key") != file_key(path):
            return None
        sha, vouched = e.get("sha256"), e.get("vouched")
        return (sha, vouched) if isinstance(sha, str) and isinstance(vouched, str) else None

    def put(self, path: str, key: Key | None, sha256: str, vouched: str) -> None:
        """Keep a package-owned file's identity (the caller knows it is one), read while the
        file had `key` (taken before hashing: a file that changed meanwhile is not kept)."""
        if self.status is None or key is None or not sha256 or file_key(path) != key:
            return
        self._files[path] = {"key": key, "sha256": sha256, "vouched": vouched}
        self._dirty = True

    def save(self) -> None:
        """Write what changed, without the entries of files that changed or went since (so
        the cache holds at most the package-owned files as they are now)."""
        if not self._dirty or self.path is None or self.status is None:
            return
        self._files = {
            p: e
            for p, e in self._files.items()
            if isinstance(e, dict) and e.get("key") == file_key(p)
        }
        body = orjson.dumps({"version": VERSION, "status": self.status, "files": self._files})
        try:
            make_private_dir(self.path.parent)
            write_file(self.path, _digest(body) + b"\n" + body, 0o600, durable=False)
        except OSError:
            return
        self._dirty = False

    def _load(self) -> dict[str, Any]:
        assert self.path is not None
        try:
            digest, _, body = read_regular(self.path).partition(b"\n")
            doc = orjson.loads(body) if digest == _digest(body) else None
        except (OSError, InputError, orjson.JSONDecodeError):  # a FIFO: nothing kept
            return {}
        if not isinstance(doc, dict) or doc.get("version") != VERSION:
            return {}
        if doc.get("status") != self.status or not isinstance(doc.get("files"), dict):
            return {}  # a package came or went: who owns what may have changed
        files: dict[str, Any] = doc["files"]
        return files


def _digest(body: bytes) -> bytes:
    return hashlib.sha256(body).hexdigest().encode()
