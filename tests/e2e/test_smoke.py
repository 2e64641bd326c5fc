from __future__ import annotations

import subprocess

from tests.fixtures.home import Home, install


def test_shimmed_git_is_logged_with_its_pid(home: Home, interpreter: str) -> None:
    install(home, ["git"], interpreter)
    shim = home.loc.shim_dir / "git"
    out = subprocess.run([str(shim), "--version"], capture_output=True, env=home.env, check=True)
    assert out.stdout.startswith(b"git version")
    [rec] = home.execs()
    assert rec.shim == "git"
    assert rec.args == (b"--version",)
    assert rec.target.endswith(b"/git")
