"""Writing a config wrap-config planned: under a lock, with a backup, atomically; and undo.

The first wrap keeps the original bytes in FILE.mcpshim-backup (never overwritten); the
file is replaced atomically with its mode kept; --undo puts the original back, but only
while the file is that original with entries wrapped. Every read-plan-write happens under
FILE.mcpshim-lock, so concurrent runs each see the others' changes.
"""

from __future__ import annotations

import contextlib
import copy
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcpshim.base import safewrite
from mcpshim.base.fdio import read_regular
from mcpshim.base.flock import LockTimeoutError, open_lock, take
from mcpshim.errors import InputError
from mcpshim.pathcheck.clientconfig import McpConfig, parse_config
from mcpshim.pathcheck.wrap import WrapPlan, is_wrapped, unwrapped

__all__ = [
    "BACKUP_SUFFIX",
    "LOCK_SUFFIX",
    "apply_plan",
    "backup_path",
    "derived_from",
    "edit_lock",
    "plan_undo",
    "undo",
]

BACKUP_SUFFIX = ".mcpshim-backup"
LOCK_SUFFIX = ".mcpshim-lock"
LOCK_TIMEOUT_S = 30.0


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def _locked(lock_path: Path, deadline: float) -> int:
    """An fd holding flock on the file now at `lock_path`: a lock taken on a file a previous
    holder had already unlinked (or replaced) is let go and taken again on the new one."""
    while True:
        fd = open_lock(lock_path)
        try:
            if not take(fd, max(deadline - time.monotonic(), 0.0), 0.02):
                raise LockTimeoutError(lock_path)
            try:
                same = os.stat(lock_path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            return fd
        os.close(fd)


@contextlib.contextmanager
def edit_lock(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold FILE.mcpshim-lock (beside the real file, symlinks followed) while a config is
    read, planned and replaced: two wrap-config runs at once would otherwise both plan from
    the same bytes, and the second rename would drop the first one's entries. Callers
    re-read under it. The holder unlinks it before letting go, so nothing of wrap-config is
    left beside the config (after --undo, the directory is as it was); a waiter that got
    the unlinked file takes the lock again on the path's new one (`_locked`)."""
    real = Path(os.path.realpath(path))
    lock_path = real.with_name(real.name + LOCK_SUFFIX)
    try:
        fd = _locked(lock_path, time.monotonic() + timeout)
    except LockTimeoutError:
        raise InputError(
            f"{lock_path}: another wrap-config has held this lock for {timeout:.0f} s; "
            "try again when it is done"
        ) from None
    except OSError as exc:
        raise InputError(f"{lock_path}: cannot take the lock: {exc.strerror}") from None
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock_path.unlink()
        os.close(fd)


def _strip(entry: Any) -> Any:
    """An entry as it was before wrapping (PATH aside, which wrapping sets)."""
    if not isinstance(entry, dict):
        return entry
    e = copy.deepcopy(entry)
    args = e.get("args") or []
    if is_wrapped(e.get("command"), args):
        e["command"], e["args"] = unwrapped(args)
    env = e.get("env") or {}
    env.pop("PATH", None)
    e["env"] = env
    e["args"] = e.get("args") or []
    return e


def derived_from(original: bytes, current: McpConfig) -> bool:
    """Whether the current file is the backed-up original with some entries wrapped."""
    try:
        before = parse_config(current.path, original)
    except InputError:
        return False
    a, b = before.document.root.value, current.document.root.value
    if {k: v for k, v in a.items() if k != before.servers_key} != {
        k: v for k, v in b.items() if k != current.servers_key
    }:
        return False
    sa, sb = a.get(before.servers_key, {}), b.get(current.servers_key, {})
    if sa.keys() != sb.keys():
        return False
    for name, entry in sb.items():
        was = sa[name]
        if entry == was:
            continue
        if not isinstance(entry, dict) or not is_wrapped(
            entry.get("command"), entry.get("args", [])
        ):
            return False
        if _strip(entry) != _strip(was):
            return False
    return True


def apply_plan(plan: WrapPlan, config: McpConfig) -> Path | None:
    """Write the backup (first time only) and the new file; return the backup's path."""
    if not plan.changed:
        return None
    backup = backup_path(plan.path)
    st = os.stat(plan.path)
    if backup.exists():
        held = read_regular(backup)
        if held != plan.original and not derived_from(held, config):
            raise InputError(
                f"{backup} already holds a different original, and {plan.path} is not that "
                "original with entries wrapped; refusing to overwrite the backup. Run "
                "`mcpshim wrap-config --undo` or move the backup away first."
            )
    else:
        try:
            safewrite.create_exclusive(backup, plan.original, st)
        except FileExistsError:
            raise InputError(f"{backup} appeared while wrapping; run the command again") from None
    safewrite.replace_atomically(plan.path, plan.new, st)
    return backup


def plan_undo(config: McpConfig) -> bytes:
    """The original bytes --undo would restore (checked against the current file)."""
    backup = backup_path(config.path)
    try:
        original = read_regular(backup)
    except FileNotFoundError:
        raise InputError(f"{backup}: no backup, so nothing to undo") from None
    if original != config.raw and not derived_from(original, config):
        raise InputError(
            f"{config.path} changed beyond the wrapping since {backup} was written; "
            f"refusing to overwrite those changes. To restore the original anyway: "
            f"mv {backup} {config.path}"
        )
    return original


def undo(config: McpConfig) -> bytes:
    original = plan_undo(config)
    safewrite.replace_atomically(config.path, original, os.stat(config.path))
    os.unlink(backup_path(config.path))
    return original
