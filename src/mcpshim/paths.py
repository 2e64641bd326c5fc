"""Every location mcpshim reads or writes, in one place.

Defaults come from platformdirs (so HOME and the XDG variables decide them for the Python
side); the shims never consult these: their log directory is a literal written at install.
platformdirs loads when a default is asked for (21 ms: a traced `run` makes Locations
before its server starts, from directories found without it: shim.rundirs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Locations",
    "config_file",
    "default_config_dir",
    "default_identity_cache",
    "default_log_dir",
    "default_shim_dir",
    "default_state_dir",
]

APP = "mcpshim"


def default_shim_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir(APP)) / "shims"


def default_state_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir(APP))


def default_log_dir() -> Path:
    return default_state_dir() / "log"


def default_config_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_config_dir(APP))


def default_identity_cache() -> Path:
    """Package-owned executables' identities, kept between commands (contract.identitycache)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP)) / "identities.json"


def config_file() -> Path:
    """The user's settings (TOML): `[log]` rotation and retention for now."""
    return default_config_dir() / "config.toml"


@dataclass(frozen=True)
class Locations:
    """The shim directory and the log directory its shims are pinned to."""

    shim_dir: Path
    log_dir: Path

    @property
    def manifest(self) -> Path:
        return self.shim_dir / "manifest.toml"

    @property
    def log_file(self) -> Path:
        return self.log_dir / "exec.log"

    @property
    def lock_file(self) -> Path:
        return self.log_dir / "exec.log.lock"

    @property
    def spill_dir(self) -> Path:
        return self.log_dir / "spill"

    @property
    def boot_dir(self) -> Path:
        return self.log_dir / "boot"

    @property
    def index_dir(self) -> Path:
        """What mcpshim derives from the log: the session index, review marks."""
        return self.log_dir / "index"

    @property
    def parents_dir(self) -> Path:
        """Markers: this shell parent's command line is on record already."""
        return self.log_dir / "parents"
