"""Run only by tests/project/test_real_home.py, in a pytest of its own whose HOME is a
throwaway "real" one: what a test that forgot the `home` fixture does (PROBE_WRITES=forgot:
its write lands in the suite's throwaway HOME) and one that writes into the real HOME by
its path (PROBE_WRITES=real: the run fails)."""

from __future__ import annotations

import os
from pathlib import Path

from mcpshim.paths import Locations
from mcpshim.shim import install as shim_install


def test_installs_without_the_home_fixture(tmp_path: Path) -> None:
    writes = os.environ.get("PROBE_WRITES")
    if writes == "forgot":
        loc = Locations(tmp_path / "shims", tmp_path / "log")
        shim_install.install(loc, ["git"], {})  # registers tmp_path/shims in the state dir
        state = Path(os.environ["XDG_STATE_HOME"]) / "mcpshim" / "shim-dirs"
        assert state.is_file() and not state.is_relative_to(os.environ["PROBE_REAL_HOME"])
    elif writes == "real":
        state = Path(os.environ["PROBE_REAL_HOME"]) / ".local/state/mcpshim"
        state.mkdir(parents=True)
        (state / "shim-dirs").write_text(f"{tmp_path}/shims\n")
