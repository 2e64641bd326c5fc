"""base.safewrite, the one writer of whole files, and the writers built on it (lock, seal
state, manifest, session index) against a planted symlink or FIFO."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mcpshim.base import safewrite
from mcpshim.contract import lockfile
from mcpshim.errors import InputError
from mcpshim.log import marks
from tests.fixtures.home import Home, install

VICTIM = b"victim\n"


def _victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.write_bytes(VICTIM)
    return v


def test_a_symlink_or_a_fifo_in_the_files_place_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "f"
    link.symlink_to(_victim(tmp_path))
    with pytest.raises(OSError, match="is a symlink"):
        safewrite.write_file(link, b"new")
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        safewrite.write_file(fifo, b"new")
    assert (tmp_path / "victim").read_bytes() == VICTIM
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "p", "victim"]


def test_mode_owner_exclusive_and_unchanged(tmp_path: Path) -> None:
    f = tmp_path / "f"
    assert safewrite.write_file(f, b"one", 0o640)
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    os.chmod(f, 0o604)
    assert safewrite.write_file(f, b"two")  # an existing file keeps its mode
    assert f.read_bytes() == b"two" and stat.S_IMODE(f.stat().st_mode) == 0o604
    before = f.stat().st_ino
    assert not safewrite.write_file(f, b"two", unchanged_ok=True)
    assert f.stat().st_ino == before  # not rewritten
    with pytest.raises(FileExistsError):
        safewrite.write_file(f, b"three", exclusive=True)
    assert f.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_a_directory_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(OSError, match="is a symlink"):
        safewrite.open_dir(tmp_path / "link")
    fd = safewrite.open_dir(tmp_path / "made", create=True)
    try:
        safewrite.write_file(Path("page"), b"x", dir_fd=fd)
    finally:
        os.close(fd)
    assert (tmp_path / "made" / "page").read_bytes() == b"x"


def test_appends_refuse_a_symlink(home: Home, tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    with pytest.raises(OSError, match="is a symlink"):
        safewrite.open_append(_link(tmp_path, victim))
    # review marks: a planted symlink in their place gets nothing (and review goes on)
    home.loc.index_dir.mkdir(parents=True)
    (home.loc.index_dir / "reviews.jsonl").symlink_to(victim)
    marks.note_review(home.loc, [], "s", "none", 0, "2026-01-01T00:00:00Z")
    assert victim.read_bytes() == VICTIM


def _link(tmp_path: Path, to: Path) -> Path:
    link = tmp_path / "append-link"
    link.symlink_to(to)
    return link


def test_the_lock_and_the_manifest_are_not_written_through_a_symlink(
    home: Home, tmp_path: Path
) -> None:
    victim = _victim(tmp_path)
    lock = tmp_path / "mcpshim.lock"
    lock.symlink_to(victim)
    with pytest.raises(InputError, match="is a symlink"):
        lockfile.save_lock(lockfile.Lock(), lock)
    assert victim.read_bytes() == VICTIM
    install(home, ["true"])
    manifest = home.loc.shim_dir / "manifest.toml"
    kept = tmp_path / "kept-manifest"
    kept.write_bytes(manifest.read_bytes())
    manifest.unlink()
    manifest.symlink_to(kept)
    with pytest.raises(OSError, match="is a symlink"):
        install(home, ["true", "false"])
    assert manifest.is_symlink() and b"false" not in kept.read_bytes()
