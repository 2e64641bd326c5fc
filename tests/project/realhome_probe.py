"""Run only by tests/project/test_real_home.py, in a pytest of its own whose HOME is a
throwaway "real" one: what a test that forgot the `home` fixture does to the user's HOME."""

from __future__ import annotations

import os
from pathlib import Path

from mcpshim.paths import Locations
from mcpshim.shim import install as shim_install


def test_installs_without_the_home_fixture(tmp_path: Path) -> None:
    if os.environ.get("PROBE_WRITES") != "1":
        return
    loc = Locations(tmp_path / "shims", tmp_path / "log")
    shim_install.install(loc, ["git"], {})  # registers tmp_path/shims in the state dir
