"""Identities remembered between commands: a package-owned file is hashed once while it and
the package database stand; a changed file, a changed database, a damaged or foreign cache,
and a file no package owns are read again."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcpshim.contract.identity import Identities
from mcpshim.contract.identitycache import IdentityCache, file_key
from tests.fixtures.home import Home

DPKG = shutil.which("dpkg-query") is not None
needs_dpkg = pytest.mark.skipif(not DPKG, reason="no dpkg: nothing is kept")


@needs_dpkg
def test_a_package_owned_file_is_hashed_once_across_commands(tmp_path: Path) -> None:
    kept = tmp_path / "cache" / "identities.json"
    mine = tmp_path / "tool"
    mine.write_bytes(b"#!/bin/sh\n")
    paths = ["/bin/sh", "/usr/bin/git", str(mine)]
    first = Identities(kept=kept)
    got = first.lookup(paths)
    assert first.hashed == 3 and got["/bin/sh"].owned and kept.exists()
    assert (kept.stat().st_mode & 0o777) == 0o600
    again = Identities(kept=kept)  # the next command
    assert again.lookup(paths) == got
    assert again.hashed == 1  # only the file no package owns is read again
    assert again.queries == 1  # dpkg -S about that one (no package: no version asked)
    # no cache: everything read, the same answers
    fresh = Identities()
    assert fresh.lookup(paths) == got and fresh.hashed == 3


@needs_dpkg
def test_a_lookup_that_finds_everything_kept_asks_no_package_manager(tmp_path: Path) -> None:
    kept = tmp_path / "identities.json"
    Identities(kept=kept).lookup(["/bin/sh", "/usr/bin/git"])
    again = Identities(kept=kept)
    again.lookup(["/bin/sh", "/usr/bin/git"])
    assert again.hashed == 0 and again.queries == 0


def _cache_for(tmp_path: Path) -> tuple[IdentityCache, Path, Path]:
    status = tmp_path / "status"
    status.write_text("Package: x\n")
    f = tmp_path / "prog"
    f.write_bytes(b"one")
    c = IdentityCache(tmp_path / "c.json", str(status))
    c.put(str(f), file_key(str(f)), "sha-one", "dpkg package x 1")
    c.save()
    return c, status, f


def test_a_file_changed_since_is_read_again(tmp_path: Path) -> None:
    _, status, f = _cache_for(tmp_path)
    assert IdentityCache(tmp_path / "c.json", str(status)).get(str(f)) == (
        "sha-one",
        "dpkg package x 1",
    )
    st = f.stat()
    f.write_bytes(b"two")  # same size, and the old mtime put back: the ctime still moves
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert IdentityCache(tmp_path / "c.json", str(status)).get(str(f)) is None
    f.unlink()
    assert IdentityCache(tmp_path / "c.json", str(status)).get(str(f)) is None


def test_a_package_install_forgets_every_identity(tmp_path: Path) -> None:
    _, status, f = _cache_for(tmp_path)
    with status.open("a") as fh:
        fh.write("Package: y\n")
    assert IdentityCache(tmp_path / "c.json", str(status)).get(str(f)) is None


@pytest.mark.parametrize("damage", ["byte", "digest", "version", "truncated", "not-json"])
def test_a_damaged_cache_is_ignored(tmp_path: Path, damage: str) -> None:
    _, status, f = _cache_for(tmp_path)
    path = tmp_path / "c.json"
    digest, _, body = path.read_bytes().partition(b"\n")
    if damage == "byte":
        body = body.replace(b"sha-one", b"sha-two")
    elif damage == "digest":
        digest = b"0" * 64
    elif damage == "version":
        body = body.replace(b'"version":1', b'"version":9')
        digest = hashlib.sha256(body).hexdigest().encode()
    elif damage == "truncated":
        body = body[:20]
    else:
        body = b"{nope"
        digest = hashlib.sha256(body).hexdigest().encode()
    path.write_bytes(digest + b"\n" + body)
    assert IdentityCache(path, str(status)).get(str(f)) is None


def test_a_file_that_changed_while_it_was_hashed_is_not_kept(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("x")
    f = tmp_path / "prog"
    f.write_bytes(b"one")
    before = file_key(str(f))
    f.write_bytes(b"longer now")
    c = IdentityCache(tmp_path / "c.json", str(status))
    c.put(str(f), before, "sha-of-one", "dpkg package x 1")
    c.save()
    assert not (tmp_path / "c.json").exists()


def test_without_a_readable_package_database_nothing_is_kept(tmp_path: Path) -> None:
    f = tmp_path / "prog"
    f.write_bytes(b"one")
    c = IdentityCache(tmp_path / "c.json", str(tmp_path / "no-status"))
    c.put(str(f), file_key(str(f)), "sha", "dpkg package x 1")
    c.save()
    assert c.get(str(f)) is None and not (tmp_path / "c.json").exists()


@needs_dpkg
def test_approve_keeps_identities_in_the_users_cache_dir(home: Home) -> None:
    """Through the CLI: the cache lands under XDG_CACHE_HOME (never the real HOME), and a
    second approve of the same session finds every identity there and writes the same lock
    (save the time it was approved)."""
    from tests.fixtures.benchmod import load_benchmark

    bench = load_benchmark("approve_scale")
    log = home.root / "biglog"
    bench.generate(log, 50)
    lock = home.root / "a.lock"
    argv = [sys.executable, "-m", "mcpshim", "approve", "--dir", str(home.root / "shims")]
    argv += ["--log-dir", str(log), "--session", bench.SESSION, "--lock", str(lock), "--yes"]
    subprocess.run(argv, env=home.env, check=True, capture_output=True)
    kept = Path(home.env["XDG_CACHE_HOME"]) / "mcpshim" / "identities.json"
    assert kept.exists()
    first, held = lock.read_text(), kept.stat()
    lock.unlink()
    subprocess.run(argv, env=home.env, check=True, capture_output=True)
    again = kept.stat()  # every identity was found there: nothing new to write
    assert (again.st_ino, again.st_mtime_ns) == (held.st_ino, held.st_mtime_ns)

    def unstamped(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("approved = ")]

    assert '"/usr/bin/node"' in first and unstamped(lock.read_text()) == unstamped(first)


def test_a_save_drops_the_entries_of_files_that_changed_or_went(tmp_path: Path) -> None:
    _, status, f = _cache_for(tmp_path)
    gone, kept = tmp_path / "gone", tmp_path / "kept"
    for p in (gone, kept):
        p.write_bytes(b"x")
    c = IdentityCache(tmp_path / "c.json", str(status))
    for p in (gone, kept):
        c.put(str(p), file_key(str(p)), "sha-" + p.name, "dpkg package x 1")
    gone.unlink()
    f.write_bytes(b"changed")
    c.save()
    body = (tmp_path / "c.json").read_bytes().partition(b"\n")[2]
    assert b"sha-kept" in body and b"sha-gone" not in body and b"sha-one" not in body
