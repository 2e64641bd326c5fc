"""lint-path and review know every shim directory mcpshim installed (its manifest), not only
the default one, without --dir."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mcpshim.paths import Locations
from mcpshim.shim import install, registry
from tests.fixtures.home import Home, dash_path

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def _cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPSHIM, *args], env=home.env, capture_output=True, text=True, timeout=120
    )


def _tool(d: Path) -> Path:
    d.mkdir(parents=True)
    tool = d / "mytool"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    return tool


def _second(home: Home, tmp_path: Path) -> Path:
    """The default shim dir with `true`, and a second one (same log) with `mytool`."""
    install.install(home.loc, ["true"], {}, interpreter=dash_path())
    other = tmp_path / "project-shims"
    tool = _tool(tmp_path / "bin")
    loc = Locations(other, home.loc.log_dir)
    install.install(loc, ["mytool"], {"mytool": str(tool)}, interpreter=dash_path(),
                    allow_unsafe=True)  # fmt: skip
    return other


def test_install_registers_its_directory(home: Home, tmp_path: Path) -> None:
    other = _second(home, tmp_path)
    assert list(registry.installed()) == [str(home.loc.shim_dir), str(other)]
    install.install(Locations(other, home.loc.log_dir), ["true"], {}, interpreter=dash_path())
    assert registry.registry_file().read_text().count(str(other)) == 1  # noted once


def test_lint_path_takes_any_installed_shim_dir(home: Home, tmp_path: Path) -> None:
    other = _second(home, tmp_path)
    done = _cli(home, "lint-path", f"{other}:/usr/bin:/bin", "--format", "json")
    ids = [f["rule"] for f in json.loads(done.stdout)["findings"]]
    assert "MCS207" not in ids, done.stdout  # an installed shim dir is first
    done = _cli(home, "lint-path", f"/usr/bin:{other}:/bin", "--format", "json")
    [f] = [f for f in json.loads(done.stdout)["findings"] if f["rule"] == "MCS207"]
    assert f"the shim directory {other} (installed by mcpshim) is PATH[1]" in f["message"]
    done = _cli(home, "lint-path", "/usr/bin:/bin", "--format", "json")
    [f] = [f for f in json.loads(done.stdout)["findings"] if f["rule"] == "MCS207"]
    assert "nor is any other shim directory mcpshim installed" in f["message"]
    # --dir names one directory and only that one
    done = _cli(home, "lint-path", f"{other}:/usr/bin", "--dir", str(home.loc.shim_dir))
    assert "MCS207" in done.stdout


def test_review_checks_a_record_against_its_own_directorys_manifest(
    home: Home, tmp_path: Path
) -> None:
    other = _second(home, tmp_path)
    subprocess.run([str(other / "mytool")], env=home.env, check=True)
    done = _cli(home, "review", "--format", "json", "--fail-on", "high")
    assert "MCS111" not in done.stdout  # unchanged since install
    with (tmp_path / "bin" / "mytool").open("a") as fh:
        fh.write("# changed\n")
    done = _cli(home, "review", "--format", "json", "--fail-on", "high")
    found = [f for f in json.loads(done.stdout)["findings"] if f["rule"] == "MCS111"]
    assert found and "now hashes to" in found[0]["message"]  # other's manifest pins it
