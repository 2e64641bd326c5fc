"""Installing, listing and removing shims, and the manifest that owns them.

mcpshim only ever overwrites or deletes a file that carries the shim marker (render.MARKER).
Targets are pinned once, at install time, from a trusted search path, never from the
caller's PATH.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from mcpshim.errors import InputError, UsageError
from mcpshim.log.execlog import write_boot_anchor
from mcpshim.paths import Locations
from mcpshim.shim.manifest import (
    Manifest,
    OnFailure,
    ShimEntry,
    load_manifest,
    write_manifest,
)
from mcpshim.shim.render import LIB, MARKER, check_name, render_lib, render_shim
from mcpshim.shim.targets import (
    default_interpreter,
    file_digest,
    known_shells,
    resolve_target,
    trusted_search_path,
    unsafe_reason,
)

__all__ = [
    "DEFAULT_COMMANDS",
    "InstallResult",
    "ShimStatus",
    "install",
    "list_shims",
    "path_line",
    "uninstall",
    "which_shell",
]

DEFAULT_COMMANDS = ("git", "ssh", "sh", "node", "npm")


# ---- install / uninstall / list -----------------------------------------------------------


@dataclass(frozen=True)
class InstallResult:
    installed: tuple[ShimEntry, ...]
    unchanged: tuple[str, ...]
    skipped: Mapping[str, str]


def _owned(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(512)
    except OSError:
        return False
    return any(line.startswith(MARKER.encode()) for line in head.split(b"\n")[:3])


def _replace(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    os.replace(tmp, path)


def install(
    loc: Locations,
    names: Iterable[str],
    targets: Mapping[str, str],
    on_failure: OnFailure = "run",
    allow_unsafe: bool = False,
    interpreter: str | None = None,
) -> InstallResult:
    requested = list(dict.fromkeys([*names, *targets]))
    explicit = bool(requested)
    if not explicit:
        requested = list(DEFAULT_COMMANDS)
    for n in requested:
        check_name(n)
    loc.shim_dir.mkdir(parents=True, exist_ok=True)
    for d in (loc.log_dir, loc.spill_dir, loc.boot_dir, loc.parents_dir):
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_boot_anchor(loc)
    os.close(os.open(loc.lock_file, os.O_WRONLY | os.O_CREAT, 0o600))
    os.close(os.open(loc.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))

    lib_path = loc.shim_dir / LIB
    lib_text = render_lib()
    if lib_path.exists() and not _owned(lib_path):
        raise InputError(f"{lib_path} exists and was not written by mcpshim; left alone")
    if not lib_path.exists() or lib_path.read_text() != lib_text:
        _replace(lib_path, lib_text, 0o644)

    old = load_manifest(loc.shim_dir)
    interp = interpreter or (old.interpreter if old else default_interpreter())
    entries = dict(old.shims) if old else {}
    search = trusted_search_path()
    shells = known_shells()
    done: list[ShimEntry] = []
    unchanged: list[str] = []
    skipped: dict[str, str] = {}
    for name in requested:
        target = targets.get(name) or resolve_target(name, search, loc.shim_dir)
        if target is None:
            skipped[name] = "not found in " + ":".join(search)
            continue
        if not os.path.isabs(target) or not os.path.isfile(target):
            raise InputError(f"--target {name}={target}: not an absolute path to a file")
        if not os.access(target, os.X_OK):
            raise InputError(f"--target {name}={target}: not executable")
        if os.path.realpath(os.path.dirname(target)) == os.path.realpath(loc.shim_dir):
            raise InputError(f"{name}: the target {target} is in the shim directory itself")
        reason = unsafe_reason(target)
        if reason and not allow_unsafe:
            raise InputError(f"{name}: refusing target {target}: {reason} (--allow-unsafe-target)")
        text = render_shim(
            name, target, str(loc.log_dir), on_failure, interp, str(lib_path), shells
        )
        shim_path = loc.shim_dir / name
        digest, size = file_digest(target)
        shim_digest = hashlib.sha256(text.encode()).hexdigest()
        if shim_path.exists() or shim_path.is_symlink():
            if not _owned(shim_path):
                raise InputError(f"{shim_path} exists and was not written by mcpshim; left alone")
            if shim_path.read_text() == text and name in entries:
                prev = entries[name]
                if prev.sha256 == digest:
                    unchanged.append(name)
                    continue
        _replace(shim_path, text, 0o755)
        entry = ShimEntry(
            name,
            target,
            digest,
            size,
            datetime.now(timezone.utc).replace(microsecond=0),
            shim_digest,
        )
        entries[name] = entry
        done.append(entry)
    if explicit and not done and not unchanged:
        raise InputError("nothing installed: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    write_manifest(loc.shim_dir, Manifest(str(loc.log_dir), on_failure, interp, entries))
    return InstallResult(tuple(done), tuple(unchanged), skipped)


def uninstall(shim_dir: Path, names: Iterable[str], everything: bool) -> list[str]:
    manifest = load_manifest(shim_dir)
    if manifest is None:
        raise InputError(f"no mcpshim manifest in {shim_dir}")
    wanted = list(manifest.shims) if everything else list(names)
    if not wanted:
        raise UsageError("name the shims to remove, or pass --all")
    unknown = [n for n in wanted if n not in manifest.shims]
    if unknown:
        raise InputError("not installed here: " + ", ".join(unknown))
    removed = []
    for n in wanted:
        p = shim_dir / n
        if _owned(p):
            p.unlink()
            removed.append(n)
    left = {k: v for k, v in manifest.shims.items() if k not in wanted}
    if left:
        write_manifest(
            shim_dir,
            Manifest(manifest.log_dir, manifest.on_log_failure, manifest.interpreter, left),
        )
    else:
        (shim_dir / "manifest.toml").unlink()
        if _owned(shim_dir / LIB):
            (shim_dir / LIB).unlink()
    return removed


@dataclass(frozen=True)
class ShimStatus:
    entry: ShimEntry
    state: str  # ok | target-changed | target-missing | shim-missing | shim-edited

    @property
    def ok(self) -> bool:
        return self.state == "ok"


def list_shims(shim_dir: Path) -> list[ShimStatus]:
    manifest = load_manifest(shim_dir)
    if manifest is None:
        return []
    out = []
    for name, e in sorted(manifest.shims.items()):
        p = shim_dir / name
        if not p.is_file():
            state = "shim-missing"
        elif hashlib.sha256(p.read_bytes()).hexdigest() != e.shim_sha256:
            state = "shim-edited"
        elif not os.path.isfile(e.target):
            state = "target-missing"
        elif file_digest(e.target) != (e.sha256, e.size):
            state = "target-changed"
        else:
            state = "ok"
        out.append(ShimStatus(e, state))
    return out


def path_line(shim_dir: Path, shell: str) -> str:
    d = str(shim_dir)
    if shell == "fish":
        return f"set -gx PATH {shlex.quote(d)} $PATH"
    return f'export PATH={shlex.quote(d)}:"$PATH"'


def which_shell() -> str:
    return "fish" if Path(os.environ.get("SHELL", "")).name == "fish" else "sh"
