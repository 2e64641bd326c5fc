"""wrap-config writes the shim dir, then the PATH the client would pass: not the whole
interactive PATH of the shell it ran in; deduplicated; warned about; --path sets it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mcpshim.pathcheck import clientpath
from tests.fixtures.home import Home

SHIM = "/opt/mcpshim/shims"


def _wrap(home: Home, config: Path, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "mcpshim", "wrap-config", str(config), "--all",
            "--dir", SHIM, *args]  # fmt: skip
    env = {**home.env, "PATH": path}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def _config(tmp_path: Path, servers: dict[str, object], name: str = ".mcp.json") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


def _paths(config: Path) -> dict[str, str]:
    doc = json.loads(config.read_text())
    return {k: v["env"]["PATH"] for k, v in doc["mcpServers"].items()}


def test_the_shells_relative_and_repeated_entries_are_not_frozen_in(
    home: Home, tmp_path: Path
) -> None:
    config = _config(tmp_path, {"a": {"command": "git"}})
    shell = f".:node_modules/.bin:/usr/bin::{SHIM}:/bin:/usr/bin/:/usr/bin"
    done = _wrap(home, config, shell)
    assert done.returncode == 0, done.stderr
    assert _paths(config) == {"a": f"{SHIM}:/usr/bin:/bin"}
    assert f"PATH for entries without env.PATH: {SHIM}:/usr/bin:/bin" in done.stdout
    assert "this shell's PATH, absolute entries only" in done.stdout


def test_an_entry_lint_path_would_flag_is_warned_about(home: Home, tmp_path: Path) -> None:
    open_dir = tmp_path / "world-writable"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    config = _config(tmp_path, {"a": {"command": "git"}})
    done = _wrap(home, config, f"/usr/bin:{open_dir}:/bin")
    assert done.returncode == 0, done.stderr
    assert _paths(config) == {"a": f"{SHIM}:/usr/bin:{open_dir}:/bin"}
    warned = [x for x in done.stderr.splitlines() if x.startswith("mcpshim: warning: ")]
    assert any(str(open_dir) in x and "MCS2" in x for x in warned), done.stderr


def test_path_sets_it_and_a_servers_own_path_is_deduplicated(home: Home, tmp_path: Path) -> None:
    servers = {
        "own": {"command": "git", "env": {"PATH": f"/opt/x:{SHIM}:/opt/x:/usr/bin"}},
        "none": {"command": "git"},
    }
    config = _config(tmp_path, servers)
    done = _wrap(home, config, "/usr/bin:/bin", "--path", "/usr/local/bin:/usr/bin:/usr/bin")
    assert done.returncode == 0, done.stderr
    assert _paths(config) == {
        "own": f"{SHIM}:/opt/x:/usr/bin",
        "none": f"{SHIM}:/usr/local/bin:/usr/bin",
    }
    assert "(from --path)" in done.stdout


def test_claude_desktop_on_macos_gets_launchds_path_and_its_commands_dir(tmp_path: Path) -> None:
    bindir = tmp_path / "nvm" / "bin"
    bindir.mkdir(parents=True)
    npx = bindir / "mcpshim-test-server"
    npx.write_text("#!/bin/sh\n")
    npx.chmod(0o755)
    base, source = clientpath.client_base("claude-desktop", f"{bindir}:/usr/bin", "darwin")
    assert base == "/usr/bin:/bin:/usr/sbin:/sbin" and "launchd" in source
    commands = ["mcpshim-test-server", "git", "/abs/server"]
    got = clientpath.compose(SHIM, base, source, commands, f"{bindir}:/x")
    # the server is only found in the shell's nvm dir, so that dir is added; the rest stays system
    assert got.value == f"{SHIM}:/usr/bin:/bin:/usr/sbin:/sbin:{bindir}"
    assert got.added == (str(bindir),)
    # on Linux, and for the other clients, the base is the shell's absolute entries
    assert clientpath.client_base("claude-desktop", ".:/usr/bin", "linux")[0] == "/usr/bin"
    assert clientpath.client_base("cursor", "/usr/bin:rel", "darwin")[0] == "/usr/bin"


def test_undo_still_restores_the_original(home: Home, tmp_path: Path) -> None:
    config = _config(tmp_path, {"a": {"command": "git"}})
    before = config.read_bytes()
    assert _wrap(home, config, "/usr/bin").returncode == 0
    argv = [sys.executable, "-m", "mcpshim", "wrap-config", str(config), "--undo"]
    done = subprocess.run(argv, env=home.env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert config.read_bytes() == before
    assert os.path.exists(config)


def test_the_activated_virtualenv_does_not_leak_into_the_servers_path(
    home: Home, tmp_path: Path
) -> None:
    """Issue 30 item 4: the README says activate the venv, then wrap; the venv's bin was
    then in every wrapped server's env.PATH (and a HIGH MCS209 warned about it)."""
    venv = tmp_path / "project" / ".venv"
    (venv / "bin").mkdir(parents=True)
    tool = venv / "bin" / "only-in-venv"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    config = _config(tmp_path, {"a": {"command": "git"}, "b": {"command": "only-in-venv"}})
    argv = [sys.executable, "-m", "mcpshim", "wrap-config", str(config), "--all", "--dir", SHIM]
    env = {**home.env, "PATH": f"{venv}/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(venv)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _paths(config) == {"a": f"{SHIM}:/usr/bin:/bin", "b": f"{SHIM}:/usr/bin:/bin"}
    assert "less its activated environments" in done.stdout
    assert f"left out of the servers' PATH: {venv}/bin (the active virtualenv {venv}; " in (
        done.stdout
    )
    assert "only-in-venv is found only there: write its absolute path" in done.stdout
    assert "MCS209" not in done.stderr


def test_activated_names_the_virtualenv_the_conda_env_and_mcpshims_own() -> None:
    env = {"VIRTUAL_ENV": "/p/.venv", "CONDA_PREFIX": "/c/envs/x", "CONDA_DEFAULT_ENV": "x"}
    got = clientpath.activated(env, prefix=sys.base_prefix)
    assert got == {"/p/.venv/bin": "the active virtualenv /p/.venv",
                   "/c/envs/x/bin": "the active conda env /c/envs/x"}  # fmt: skip
    base = {"CONDA_PREFIX": "/c", "CONDA_DEFAULT_ENV": "base"}
    assert clientpath.activated(base, prefix=sys.base_prefix) == {}
    assert clientpath.activated({}, prefix="/v") == (
        {"/v/bin": "mcpshim's own virtualenv /v"} if sys.base_prefix != "/v" else {}
    )
    path, source = clientpath.client_base("cursor", "/p/.venv/bin/:/usr/bin", skip=got)
    assert path == "/usr/bin" and "less its activated environments" in source
