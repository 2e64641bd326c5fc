"""Every shim directory mcpshim installed into, so lint-path and review know them all.

`install` appends its directory (absolute) to `shim-dirs` in the user state directory, one
per line, in one O_APPEND write. Readers take a listed directory only while it still holds a
manifest that mcpshim wrote; a line that is not an absolute path is ignored. The default shim
directory counts whenever it has a manifest.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from mcpshim.base.fdio import read_regular
from mcpshim.base.safewrite import make_private_dir, open_append
from mcpshim.errors import InputError
from mcpshim.paths import default_shim_dir, default_state_dir
from mcpshim.shim.manifest import Manifest, load_manifest

__all__ = ["installed", "register", "registry_file"]


def registry_file() -> Path:
    return default_state_dir() / "shim-dirs"


def _listed() -> list[str]:
    try:
        text = read_regular(registry_file()).decode("utf-8", errors="replace")
    except (OSError, InputError):  # a FIFO in its place lists nothing, never blocks
        return []
    return [line for line in text.splitlines() if line.startswith("/") and "\0" not in line]


def register(shim_dir: Path) -> None:
    """Note a directory install wrote into (once); a state dir mcpshim cannot write to only
    means lint-path and review need --dir for it."""
    d = os.path.abspath(shim_dir)
    if "\n" in d or d in _listed():
        return
    with contextlib.suppress(OSError):
        make_private_dir(registry_file().parent)
        fd = open_append(registry_file())
        try:
            os.write(fd, (d + "\n").encode())
        finally:
            os.close(fd)


def installed() -> dict[str, Manifest]:
    """Each shim directory that still has a manifest -> that manifest (default first)."""
    out: dict[str, Manifest] = {}
    for d in dict.fromkeys([str(default_shim_dir()), *_listed()]):
        try:
            m = load_manifest(Path(d))
        except (OSError, InputError):
            continue  # damaged or unreadable: `mcpshim list --dir` says why
        if m is not None:
            out[d] = m
    return out
