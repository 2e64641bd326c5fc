"""What the shims need executable under `run --contain`, and no shell the lock did not approve.

An sh shim is a `#!` script: to run it the kernel executes its interpreter (dash), and a
file the family may execute it may execute with any arguments: `sh -c '...'`, a whole
script language, in every contained family, though the lock approved no shell. So where
the lock does not approve the shims' interpreter, the sh shims are rebuilt as native shims
at start (`install --native`: static binaries that need no interpreter, the same records),
when this machine can build them. A native shim still hands its rare paths (a
credential-shaped argument, a record that spills, a shell parent's first child, the first
exec of a boot) to its sh fallback, run by the interpreter: without the interpreter those
execs fail (126) and the start line says so; nothing runs unlogged. Where no native shim
can be built, the interpreter stays executable and the start line says "sh is executable
because the shims need it".
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass

from mcpshim.paths import Locations
from mcpshim.shim import native_install
from mcpshim.shim.install import install
from mcpshim.shim.manifest import load_manifest

__all__ = ["ShimNeeds", "shim_needs"]

SHELL_FOR_SHIMS = "sh is executable because the shims need it"


@dataclass(frozen=True)
class ShimNeeds:
    """The shim files the family may execute (path -> why), their interpreter when it must
    be allowed (with why), what was rebuilt, and what the start line must say."""

    files: dict[str, str]
    interpreter: tuple[str, str] | None
    built: tuple[str, ...]
    notes: tuple[str, ...]


def _inode(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def shim_needs(loc: Locations, approved: Collection[str]) -> ShimNeeds:
    """The shims of `loc` under a ruleset allowing the `approved` executables; sh shims are
    rebuilt as native ones here when the lock does not approve their interpreter."""
    manifest = load_manifest(loc.shim_dir)
    if manifest is None or not manifest.shims:
        return ShimNeeds({}, None, (), ())
    interp = manifest.interpreter
    inodes = {i for p in approved if (i := _inode(p)) is not None}
    shell_approved = _inode(interp) in inodes
    sh = sorted(n for n, e in manifest.shims.items() if e.kind != "native")
    built: tuple[str, ...] = ()
    notes: list[str] = []
    if sh and not shell_approved:
        plan = native_install.plan("auto")
        if plan.cc is not None:
            done = install(loc, sh, {}, manifest.on_log_failure, native_mode="auto")
            built = tuple(e.name for e in done.installed if e.kind == "native")
            notes += done.notes
            manifest = load_manifest(loc.shim_dir) or manifest
            sh = sorted(n for n, e in manifest.shims.items() if e.kind != "native")
    files: dict[str, str] = {}
    for name, entry in sorted(manifest.shims.items()):
        kind = "native, needs no interpreter" if entry.kind == "native" else "an sh script"
        files[str(loc.shim_dir / name)] = f"shim {name}, {kind}"
    if built:
        notes.append(
            f"built native shims for {', '.join(built)} in {loc.shim_dir}: the sh shims "
            f"would make {interp} executable, which the lock did not approve"
        )
    if sh and not shell_approved:
        notes.append(f"{SHELL_FOR_SHIMS}: {interp} runs the sh shims {', '.join(sh)}")
        return ShimNeeds(files, (interp, SHELL_FOR_SHIMS), built, tuple(notes))
    natives = [n for n, e in manifest.shims.items() if e.kind == "native"]
    if natives and not shell_approved:
        notes.append(
            f"the native shims' sh fallback cannot run ({interp} is not approved): a shimmed "
            "exec that needs it (a credential-shaped argument, a record that spills, a shell "
            "parent's first child, the first exec of a boot) fails with status 126"
        )
    return ShimNeeds(files, None, built, tuple(notes))
