"""A throwaway HOME for a benchmark run, so nothing it installs, seals, approves or caches
lands in the user's own mcpshim directories (an `install` there registers its shim dir,
which lint-path then trusts). Every benchmark calls it first, before it reads anything of
the environment; the directory goes when the run ends."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["throwaway_home"]


def throwaway_home() -> Path:
    """Point HOME and the XDG dirs of this process (and so its children) at a new temporary
    directory, removed at exit."""
    root = Path(tempfile.mkdtemp(prefix="mcpshim-bench-home-"))
    atexit.register(shutil.rmtree, root, True)
    os.environ.update(
        {
            "HOME": str(root),
            "XDG_DATA_HOME": str(root / ".local/share"),
            "XDG_STATE_HOME": str(root / ".local/state"),
            "XDG_CONFIG_HOME": str(root / ".config"),
            "XDG_CACHE_HOME": str(root / ".cache"),
        }
    )
    return root
