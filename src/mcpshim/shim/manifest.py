"""The manifest: which shims a directory holds, the targets they pin, and their hashes."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import tomli_w

from mcpshim.base.fdio import read_regular
from mcpshim.base.safewrite import write_file
from mcpshim.errors import InputError
from mcpshim.paths import Locations, default_log_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["Manifest", "OnFailure", "ShimEntry", "load_manifest", "locations_for", "write_manifest"]

OnFailure = Literal["run", "refuse"]


@dataclass(frozen=True)
class ShimEntry:
    name: str
    target: str
    sha256: str
    size: int
    installed: datetime
    shim_sha256: str
    #: "sh" (a script) or "native" (a compiled shim, with its sh fallback and what it was
    #: built from: see shim.native_install)
    kind: str = "sh"
    fallback_sha256: str = ""
    source_sha256: str = ""
    #: the target was named with --target: later installs keep it while it exists
    pinned: bool = False

    def to_toml(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "target": self.target,
            "sha256": self.sha256,
            "size": self.size,
            "installed": self.installed,
            "shim_sha256": self.shim_sha256,
        }
        if self.kind != "sh":
            out.update(
                kind=self.kind,
                fallback_sha256=self.fallback_sha256,
                source_sha256=self.source_sha256,
            )
        if self.pinned:
            out["pinned"] = True
        return out


@dataclass(frozen=True)
class Manifest:
    log_dir: str
    on_log_failure: OnFailure
    interpreter: str
    shims: Mapping[str, ShimEntry]
    #: the shim library's sha256 as written ("" in a manifest from before it was kept)
    lib_sha256: str = ""

    def to_toml(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": 1,
            "log_dir": self.log_dir,
            "on_log_failure": self.on_log_failure,
            "interpreter": self.interpreter,
        }
        if self.lib_sha256:
            out["lib_sha256"] = self.lib_sha256
        out["shims"] = {n: e.to_toml() for n, e in sorted(self.shims.items())}
        return out


def load_manifest(shim_dir: Path) -> Manifest | None:
    path = shim_dir / "manifest.toml"
    try:
        # a byte order mark is no part of it (as base.tomlfile.without_bom; not imported here:
        # `sessions` reads manifests and starts with few imports)
        data = tomllib.loads(read_regular(path).decode("utf-8").removeprefix("\ufeff"))
    except FileNotFoundError:
        return None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a valid manifest: {exc}") from exc
    try:
        shims = {
            n: ShimEntry(
                n,
                e["target"],
                e["sha256"],
                int(e["size"]),
                e["installed"],
                e["shim_sha256"],
                str(e.get("kind", "sh")),
                str(e.get("fallback_sha256", "")),
                str(e.get("source_sha256", "")),
                e.get("pinned", False) is True,
            )
            for n, e in data.get("shims", {}).items()
        }
        lib = data.get("lib_sha256", "")
        if not isinstance(lib, str):
            raise TypeError("a lib_sha256 string")
        return Manifest(data["log_dir"], data["on_log_failure"], data["interpreter"], shims, lib)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: manifest lacks {exc}") from exc


def write_manifest(shim_dir: Path, manifest: Manifest) -> None:
    text = (
        "# Written by mcpshim: the shims in this directory and the targets they pin.\n"
        + tomli_w.dumps(manifest.to_toml())
    )
    write_file(shim_dir / "manifest.toml", text.encode(), unchanged_ok=True)


def locations_for(shim_dir: Path, log_dir: Path | None = None) -> Locations:
    """The log a shim directory is pinned to (from its manifest), unless one is given."""
    if log_dir is None:
        m = load_manifest(shim_dir)
        log_dir = Path(m.log_dir) if m else default_log_dir()
    return Locations(shim_dir=shim_dir, log_dir=log_dir)
