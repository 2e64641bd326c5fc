"""Shared fixtures: an isolated HOME/XDG tree, real shells, the Node.js fixture server.

Plain helpers (Home, install, the test tree's paths) are in fixtures/home.py. Every test
runs on a throwaway HOME: this process's HOME and every XDG dir (the cache too) are moved
into a directory of its own as the suite starts, so a test that asks for no `home`
fixture, and every process it starts, writes nowhere in the user's HOME either.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import homeguard
from tests.fixtures.home import NODE_FIXTURE, Home, dash_path, home_at, home_env

#: the user's own mcpshim directories, named before any fixture moves HOME
_REAL_ROOTS = homeguard.real_roots(os.environ)


def _throwaway_session_home() -> Path:
    root = Path(tempfile.mkdtemp(prefix="mcpshim-test-home-"))
    atexit.register(shutil.rmtree, root, True)
    os.environ.update(home_env(root))
    return root


#: the suite's own HOME (each xdist worker its own); the `home` fixture moves a test's
#: HOME again, into its tmp_path
SESSION_HOME = _throwaway_session_home()

#: Under CI=true a skip is a failure: scripts/system-deps.sh installs every tool the suite
#: needs, so a test that misses one says CI is broken. These facts about the machine no
#: package changes are the only skips CI keeps (an architecture, the kernel's Landlock ABI,
#: the user, the network interfaces, mounting, the optional aarch64 cross-check).
CI_MAY_SKIP = re.compile(
    r"x86_64|aarch64|syscall number|Landlock|needs root|to another uid|private group|"
    r"non-loopback address|Linux-only|the Linux path|cannot mount here|mounting a tmpfs|"
    r"/dev/full|nobody cannot import"
)


def _skip_reason(longrepr: Any) -> str:
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr
    return str(text).removeprefix("Skipped: ")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") != "true" or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report.longrepr)
    if not CI_MAY_SKIP.search(reason):
        report.outcome = "failed"
        report.longrepr = (
            f"under CI=true a missing tool fails, not skips: {reason} "
            "(scripts/system-deps.sh installs what the suite needs)"
        )


_OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "ECONNRESET", "network")


@pytest.fixture(scope="session", autouse=True)
def real_home_untouched() -> Iterator[None]:
    """Fail the run when anything mcpshim-related under the real HOME changed during it
    (tests, benchmarks and demos use a throwaway HOME: the `home` fixture)."""
    before = homeguard.snapshot(_REAL_ROOTS)
    yield
    changed = homeguard.changes(before, homeguard.snapshot(_REAL_ROOTS))
    if changed:
        shown = "\n  ".join(changed[:20])
        pytest.fail(f"the test run wrote into the real HOME:\n  {shown}", pytrace=False)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Home]:
    """HOME and the XDG dirs inside tmp_path, for this process and the env handed to children."""
    root = tmp_path / "home"
    root.mkdir()
    env = home_env(root)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    yield home_at(root, env)


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


@pytest.fixture(params=["dash", "bash"])
def interpreter(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Every shim test runs once under dash and once under bash-as-sh."""
    if request.param == "dash":
        return dash_path()
    return str(request.getfixturevalue("bash_as_sh"))


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
