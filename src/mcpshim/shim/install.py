"""Installing, listing and removing shims, and the manifest that owns them.

mcpshim only ever overwrites or deletes a file that carries the shim marker (render.MARKER).
Targets are pinned once, at install time, from a trusted search path, never from the
caller's PATH.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shlex
import stat
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from mcpshim.base.safewrite import make_private_dir, write_file
from mcpshim.errors import InputError, UsageError
from mcpshim.paths import Locations
from mcpshim.shim import native, native_install, registry
from mcpshim.shim.logdir import dir_problem, log_dir_problem, write_boot_anchor
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
    "lib_status",
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
    #: one line each: why a native shim was not built (its sh shim was installed instead)
    notes: tuple[str, ...] = ()


def _owned(path: Path) -> bool:
    """Whether mcpshim wrote `path`: a regular file with the marker (a FIFO would block),
    or a native shim (an ELF file carrying its marker)."""
    if native_install.is_native_file(path):
        return True
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        head = os.read(fd, 512) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return False
    finally:
        os.close(fd)
    return any(line.startswith(MARKER.encode()) for line in head.split(b"\n")[:3])


def _replace(path: Path, text: str, mode: int) -> None:
    write_file(path, text.encode(), mode)


def _pinned(entry: ShimEntry | None, search: list[str]) -> str | None:
    """The target an earlier `--target` pinned, which a later install without one keeps
    (re-pinning it to the searched target would change what the shim runs). A manifest from
    before pins were noted: a target outside the search path can only have come that way."""
    if entry is None:
        return None
    if entry.pinned or os.path.dirname(entry.target) not in search:
        return entry.target
    return None


def _touch_private(path: Path) -> None:
    """Create `path` 0600 if missing; never through a symlink (log_dir_problem refused one)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK
    os.close(os.open(path, flags, 0o600))


def _is_bash(interpreter: str) -> bool:
    """Whether the shim interpreter is bash (under any name): bash shims run with -p."""
    try:
        out = subprocess.run(
            [interpreter, "-c", 'printf %s "${BASH_VERSION-}"'],
            env={"PATH": "/usr/bin:/bin"},
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"--interpreter {interpreter}: cannot run it: {exc}") from None
    if out.returncode != 0:
        raise UsageError(f"--interpreter {interpreter}: not a POSIX shell (`-c` failed)")
    return bool(out.stdout.strip())


def _check_dirs(loc: Locations) -> None:
    """Refuse a log or shim directory that someone else could write (see shim.logdir)."""
    for what, problem in (
        ("log directory", log_dir_problem(loc)),
        ("shim directory", dir_problem(loc.shim_dir)),
    ):
        if problem:
            raise InputError(
                f"refusing the {what}: {problem}; others could make the shims write "
                "where they choose (fix the owner or mode, or choose another directory)"
            )


def install(
    loc: Locations,
    names: Iterable[str],
    targets: Mapping[str, str],
    on_failure: OnFailure = "run",
    allow_unsafe: bool = False,
    interpreter: str | None = None,
    native_mode: native_install.NativeMode | None = None,
) -> InstallResult:
    """`native_mode`: auto builds native shims where it can (else sh, with a note), require
    stops where it cannot, off writes sh shims; None keeps each shim's kind."""
    requested = list(dict.fromkeys([*names, *targets]))
    explicit = bool(requested)
    if not explicit:
        requested = list(DEFAULT_COMMANDS)
    for n in requested:
        check_name(n)
    plan = native_install.plan(native_mode)
    _check_dirs(loc)
    for d in (loc.shim_dir, loc.log_dir, loc.spill_dir, loc.boot_dir, loc.parents_dir):
        make_private_dir(d)
    write_boot_anchor(loc.boot_dir)
    _touch_private(loc.lock_file)
    _touch_private(loc.log_file)

    lib_path = loc.shim_dir / LIB
    lib_text = render_lib()
    if lib_path.exists() and not _owned(lib_path):
        raise InputError(f"{lib_path} exists and was not written by mcpshim; left alone")
    if not lib_path.exists() or lib_path.read_text() != lib_text:
        _replace(lib_path, lib_text, 0o644)

    old = load_manifest(loc.shim_dir)
    interp = interpreter or (old.interpreter if old else default_interpreter())
    bash = _is_bash(interp)
    entries = dict(old.shims) if old else {}
    search = trusted_search_path()
    shells = known_shells()
    done: list[ShimEntry] = []
    unchanged: list[str] = []
    skipped: dict[str, str] = {}
    notes: list[str] = []
    for name in requested:
        kept = _pinned(entries.get(name), search) if name not in targets else None
        if kept is not None and not os.path.isfile(kept):
            skipped[name] = f"pinned with --target to {kept}, which is gone (--target again)"
            continue
        pinned = name in targets or kept is not None
        target = targets.get(name) or kept or resolve_target(name, search, loc.shim_dir)
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
        # (a kept pin was accepted when pinned: it is refused only if it is to be written anew)
        if reason and not allow_unsafe and kept is None:
            raise InputError(f"{name}: refusing target {target}: {reason} (--allow-unsafe-target)")
        text = render_shim(
            name, target, str(loc.log_dir), on_failure, interp, str(lib_path), shells, bash
        )
        shim_path = loc.shim_dir / name
        digest, size = file_digest(target)
        if plan.wants(entries.get(name)):
            got = _put_native(loc, name, target, on_failure, interp, bash, shells, text, entries,
                              (digest, size), plan, notes, pinned)  # fmt: skip
            if got == "unchanged":
                if entries[name].pinned != pinned:  # the manifest alone learns it was pinned
                    entries[name] = dataclasses.replace(entries[name], pinned=pinned)
                unchanged.append(name)
                continue
            if got is not None:
                done.append(got)
                continue
        shim_digest = hashlib.sha256(text.encode()).hexdigest()
        if shim_path.exists() or shim_path.is_symlink():
            if not _owned(shim_path):
                raise InputError(f"{shim_path} exists and was not written by mcpshim; left alone")
            if shim_path.read_bytes() == text.encode() and name in entries:
                prev = entries[name]
                if prev.sha256 == digest:
                    if prev.pinned != pinned:  # the manifest alone learns it was pinned
                        entries[name] = dataclasses.replace(prev, pinned=pinned)
                    unchanged.append(name)
                    continue
        if reason and not allow_unsafe:
            raise InputError(f"{name}: refusing target {target}: {reason} (--allow-unsafe-target)")
        _replace(shim_path, text, 0o755)
        native_install.remove_fallback(loc.shim_dir, name, _owned)
        entry = ShimEntry(
            name,
            target,
            digest,
            size,
            datetime.now(timezone.utc).replace(microsecond=0),
            shim_digest,
            pinned=pinned,
        )
        entries[name] = entry
        done.append(entry)
    if explicit and not done and not unchanged:
        raise InputError("nothing installed: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    lib_digest = hashlib.sha256(lib_text.encode()).hexdigest()
    write_manifest(
        loc.shim_dir, Manifest(str(loc.log_dir), on_failure, interp, entries, lib_digest)
    )
    registry.register(loc.shim_dir)
    return InstallResult(tuple(done), tuple(unchanged), skipped, tuple(dict.fromkeys(notes)))


def _put_native(
    loc: Locations,
    name: str,
    target: str,
    on_failure: OnFailure,
    interp: str,
    bash: bool,
    shells: list[str],
    text: str,
    entries: dict[str, ShimEntry],
    target_digest: tuple[str, int],
    plan: native_install.NativePlan,
    notes: list[str],
    pinned: bool = False,
) -> ShimEntry | Literal["unchanged"] | None:
    """The native shim for `name` (its new entry, put in `entries`), or "unchanged"; None
    when it cannot be built here (the note says why: the caller writes the sh shim)."""
    if plan.cc is None:
        notes.append(f"{plan.why_not}: installed sh shims instead of native ones")
        return None
    prev = entries.get(name)
    cfg = native_install.config_for(
        name, target, str(loc.log_dir), on_failure, interp, bash, shells, loc.shim_dir
    )

    def make(**kw: str) -> ShimEntry:
        now = datetime.now(timezone.utc).replace(microsecond=0)
        digest, size = target_digest
        return ShimEntry(name, target, digest, size, now, pinned=pinned, **kw)

    try:
        entry = native_install.put(
            loc.shim_dir, cfg, text, prev, target_digest, plan.cc, _owned, make
        )
    except native.NativeUnavailable as exc:
        if plan.mode == "require":
            raise UsageError(f"--native=require: {exc}") from None
        notes.append(f"{exc}: installed sh shims instead of native ones")
        return None
    if entry is None:
        return "unchanged"
    entries[name] = entry
    return entry


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
        native_install.remove_fallback(shim_dir, n, _owned)
    left = {k: v for k, v in manifest.shims.items() if k not in wanted}
    if left:
        write_manifest(shim_dir, dataclasses.replace(manifest, shims=left))
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
        elif e.kind == "native" and (bad := native_install.fallback_state(shim_dir, e)):
            state = bad
        elif not os.path.isfile(e.target):
            state = "target-missing"
        elif file_digest(e.target) != (e.sha256, e.size):
            state = "target-changed"
        else:
            state = "ok"
        out.append(ShimStatus(e, state))
    return out


def lib_status(shim_dir: Path) -> str | None:
    """The shim library's state: ok | lib-missing | lib-edited (None: no manifest here).

    Every shim sources it on its rare paths (secrets, spill files, shell parents), so an
    edited library runs inside every shim. A manifest from before its hash was kept is
    compared with the library this version writes."""
    manifest = load_manifest(shim_dir)
    if manifest is None:
        return None
    path = shim_dir / LIB
    if not path.is_file() or path.is_symlink():
        return "lib-missing"
    want = manifest.lib_sha256 or hashlib.sha256(render_lib().encode()).hexdigest()
    return "ok" if hashlib.sha256(path.read_bytes()).hexdigest() == want else "lib-edited"


def path_line(shim_dir: Path, shell: str) -> str:
    d = str(shim_dir)
    if shell == "fish":
        return f"set -gx PATH {shlex.quote(d)} $PATH"
    return f'export PATH={shlex.quote(d)}:"$PATH"'


def which_shell() -> str:
    return "fish" if Path(os.environ.get("SHELL", "")).name == "fish" else "sh"
