"""The package says what is tested and what its interface is: its classifiers name the
platform and Python the suite runs on, and it ships no py.typed (the interface is the CLI
and its versioned formats; the modules are internal: README, Limits)."""

from __future__ import annotations

import sys

from tests.fixtures.home import REPO, SRC

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _classifiers() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return list(project["classifiers"])


def test_the_classifiers_name_what_the_suite_runs_on() -> None:
    found = _classifiers()
    systems = [c for c in found if c.startswith("Operating System ::")]
    assert systems == ["Operating System :: POSIX :: Linux"] and sys.platform == "linux"
    versions = [
        c.rsplit(" :: ", 1)[1]
        for c in found
        if c.startswith("Programming Language :: Python :: 3.")
    ]
    assert versions == [f"{sys.version_info.major}.{sys.version_info.minor}"]


def test_no_typing_promise_for_internal_modules() -> None:
    assert "Typing :: Typed" not in _classifiers()
    assert not (SRC / "mcpshim" / "py.typed").exists()
