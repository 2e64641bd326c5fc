"""Shared fixtures: an isolated HOME/XDG tree and real shims installed into it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcpshim.log import execlog
from mcpshim.paths import Locations
from mcpshim.shim import install as shim_install

REPO = Path(__file__).resolve().parents[1]
#: the SARIF 2.1.0 schema, kept in the project (see tests/data/README.md)
SARIF_SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
NODE_FIXTURE = Path(__file__).parent / "fixtures" / "node_mcp_server"
_OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "ECONNRESET", "network")


@dataclass(frozen=True)
class Home:
    root: Path
    loc: Locations
    env: dict[str, str]

    def records(self) -> list[execlog.Record]:
        problems: list[execlog.LogProblem] = []
        recs = list(execlog.iter_records(self.loc, problems))
        assert problems == [], problems
        return recs

    def execs(self) -> list[execlog.ExecRecord]:
        return [r for r in self.records() if isinstance(r, execlog.ExecRecord)]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Home]:
    """HOME and the XDG dirs inside tmp_path, for this process and the env handed to children."""
    root = tmp_path / "home"
    root.mkdir()
    env = home_env(root)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    yield home_at(root, env)


def home_env(root: Path) -> dict[str, str]:
    """HOME and the XDG dirs under `root`."""
    return {
        "HOME": str(root),
        "XDG_DATA_HOME": str(root / ".local/share"),
        "XDG_STATE_HOME": str(root / ".local/state"),
        "XDG_CONFIG_HOME": str(root / ".config"),
        "XDG_CACHE_HOME": str(root / ".cache"),
    }


def home_at(root: Path, env: dict[str, str]) -> Home:
    loc = Locations(root / ".local/share/mcpshim/shims", root / ".local/state/mcpshim/log")
    return Home(root, loc, {**os.environ, **env})


@pytest.fixture(scope="session")
def seal_templates() -> Iterator[dict[tuple[int, bool], tuple[Home, str]]]:
    """Sealed logs built once per session and copied into each test's home (sealhelp)."""
    built: dict[tuple[int, bool], tuple[Home, str]] = {}
    yield built
    for tpl, _ in built.values():
        shutil.rmtree(tpl.root.parent, ignore_errors=True)


@pytest.fixture
def bash_as_sh(tmp_path: Path) -> str:
    """bash started under the name sh (POSIX mode), as /bin/sh is on macOS and Fedora."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash not installed")
    d = tmp_path / "bash-as-sh"
    d.mkdir()
    (d / "sh").symlink_to(bash)
    return str(d / "sh")


def dash_path() -> str:
    dash = shutil.which("dash")
    if dash is None:
        pytest.skip("dash not installed")
    return dash


@pytest.fixture(params=["dash", "bash"])
def interpreter(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Every shim test runs once under dash and once under bash-as-sh."""
    if request.param == "dash":
        return dash_path()
    return str(request.getfixturevalue("bash_as_sh"))


def install(home: Home, names: list[str], interpreter: str | None = None, **kw: object) -> None:
    shim_install.install(home.loc, names, {}, interpreter=interpreter, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def node_server() -> Path:
    """The Node.js fixture server (official TypeScript SDK), its SDK installed from the npm
    registry (cached, gitignored); its client.mjs is the SDK's stdio client."""
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        pytest.skip("node/npm not installed")
    if not (NODE_FIXTURE / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        proc = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund"],
            cwd=NODE_FIXTURE,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            if any(k in proc.stderr for k in _OFFLINE):
                pytest.skip(f"npm registry unreachable: {proc.stderr.strip()[-300:]}")
            raise AssertionError(f"npm install failed:\n{proc.stderr}")
    return NODE_FIXTURE / "server.mjs"
