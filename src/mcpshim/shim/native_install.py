"""The native path of install, list and uninstall: a compiled shim and the sh shim it falls
back to (`.mcpshim-sh/NAME`), both owned by the manifest.

A native shim is rebuilt only when what it is built from changed (source, config, compiler:
`source_sha256` in its manifest entry) or its binary no longer matches its hash; without a
compiler, or on a system native.c is not written for, install says so in one line and
writes the sh shim (or, with `--native=require`, stops with a usage error).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mcpshim.base.safewrite import make_private_dir
from mcpshim.errors import InputError, UsageError
from mcpshim.shim import native
from mcpshim.shim.manifest import OnFailure, ShimEntry

__all__ = [
    "NativeMode",
    "NativePlan",
    "fallback_path",
    "fallback_state",
    "is_native_file",
    "plan",
    "put",
    "remove_fallback",
]

NativeMode = Literal["off", "auto", "require"]


@dataclass(frozen=True)
class NativePlan:
    """What this install run may build: the compiler, or why none (a note for the user)."""

    mode: NativeMode | None  # None: each shim keeps its kind; new shims are sh
    cc: tuple[str, ...] | None
    why_not: str | None

    def wants(self, prev: ShimEntry | None) -> bool:
        if self.mode is None:
            return prev is not None and prev.kind == "native"
        return self.mode != "off"


def plan(mode: NativeMode | None) -> NativePlan:
    """The compiler for this run (asked once), or the one line that says why there is none."""
    if mode == "off":
        return NativePlan(mode, None, None)
    why = native.unsupported_reason()
    cc = None
    if why is None:
        found = native.find_compiler()
        if found is None:
            why = "no C compiler found (cc, or $CC)"
        else:
            cc = tuple(found)
    if why is not None and mode == "require":
        raise UsageError(f"--native=require: {why}")
    return NativePlan(mode, cc, why)


def fallback_path(shim_dir: Path, name: str) -> Path:
    return shim_dir / native.FALLBACK_DIR / name


def is_native_file(path: Path) -> bool:
    """Whether `path` is a regular ELF file that carries the native shim's marker (never
    following a link, never blocking on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 1 << 22:
            return False
        data = os.read(fd, st.st_size + 1)
    except OSError:
        return False
    finally:
        os.close(fd)
    return data[:4] == b"\x7fELF" and native.NATIVE_MARKER in data


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.chmod(mode)
        os.replace(tmp, path)
    except BaseException:  # a full disk: no half-written temporary file left behind
        tmp.unlink(missing_ok=True)
        raise


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def put(
    shim_dir: Path,
    cfg: native.NativeConfig,
    sh_text: str,
    prev: ShimEntry | None,
    target_digest: tuple[str, int],
    cc: tuple[str, ...],
    owned: Callable[[Path], bool],
    make_entry: Callable[..., ShimEntry],
) -> ShimEntry | None:
    """Write the native shim `cfg.name` and its sh fallback; None when both are as the
    manifest says already (nothing rebuilt). Raises NativeUnavailable when the build fails."""
    shim_path = shim_dir / cfg.name
    fb = Path(cfg.fallback)
    config = native.render_config(cfg)
    source = native.source_digest(config, cc)
    for p in (shim_path, fb):
        if (p.exists() or p.is_symlink()) and not owned(p):
            raise InputError(f"{p} exists and was not written by mcpshim; left alone")
    if (
        prev is not None
        and prev.kind == "native"
        and prev.source_sha256 == source
        and prev.sha256 == target_digest[0]
        and _digest(shim_path) == prev.shim_sha256
        and _digest(fb) == prev.fallback_sha256 == hashlib.sha256(sh_text.encode()).hexdigest()
    ):
        return None
    binary = native.build(config, list(cc))
    make_private_dir(fb.parent)
    _write(fb, sh_text.encode(), 0o644)
    _write(shim_path, binary, 0o755)
    return make_entry(
        kind="native",
        shim_sha256=hashlib.sha256(binary).hexdigest(),
        fallback_sha256=hashlib.sha256(sh_text.encode()).hexdigest(),
        source_sha256=source,
    )


def remove_fallback(shim_dir: Path, name: str, owned: Callable[[Path], bool]) -> None:
    """The sh fallback of a native shim, gone with it (and its directory once empty)."""
    fb = fallback_path(shim_dir, name)
    if owned(fb):
        fb.unlink()
    with contextlib.suppress(OSError):  # other fallbacks still there, or never made
        fb.parent.rmdir()


def fallback_state(shim_dir: Path, entry: ShimEntry) -> str | None:
    """shim-missing | shim-edited for a native shim's sh fallback; None when it is fine."""
    fb = fallback_path(shim_dir, entry.name)
    if not fb.is_file() or fb.is_symlink():
        return "shim-missing"
    return None if _digest(fb) == entry.fallback_sha256 else "shim-edited"


def config_for(
    name: str,
    target: str,
    log_dir: str,
    on_failure: OnFailure,
    interpreter: str,
    bash: bool,
    shells: list[str],
    shim_dir: Path,
) -> native.NativeConfig:
    return native.NativeConfig(
        name,
        target,
        log_dir,
        on_failure,
        interpreter,
        bash,
        tuple(shells),
        str(fallback_path(shim_dir, name)),
    )
