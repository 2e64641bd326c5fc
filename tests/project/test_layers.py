"""The stages import downwards only: each package's `__init__` docstring names the packages
it may import ("May import: ..."), and this test holds every module to it.

Imports under `if TYPE_CHECKING:` count too: a type that names a higher stage is a design
smell the layout would hide.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.fixtures.home import SRC as SOURCES

SRC = SOURCES / "mcpshim"
ROOT_MODULES = {"errors", "paths", "__init__", "__main__"}
_MAY = re.compile(r"^May import:\s*(.*?)\.?\s*(?:\n\s*\n|\Z)", re.M | re.S)  # may wrap


def packages(src: Path = SRC) -> dict[str, frozenset[str]]:
    """Each stage package and the stages it declares it may import."""
    out: dict[str, frozenset[str]] = {}
    for init in sorted(src.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        m = _MAY.search(doc)
        assert m, f"{init}: the docstring must say 'May import: ...' (or 'May import: nothing')"
        names = {n.strip() for n in m.group(1).split(",") if n.strip()}
        out[init.parent.name] = frozenset(() if names == {"nothing"} else names)
    return out


def _found(nodes: Sequence[ast.stmt] | ast.Module, path: Path, src: Path) -> set[str]:
    """Dotted names under mcpshim that these statements import (relative imports resolved)."""
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    here = parts[:-1]  # the package a relative import starts from (for __init__ too)
    tree = nodes if isinstance(nodes, ast.Module) else ast.Module(body=list(nodes), type_ignores=[])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "mcpshim")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            if mod.split(".")[0] == "mcpshim":
                found.add(mod)
                found.update(f"{mod}.{a.name}" for a in node.names)
    return found


def imports_of(path: Path, src: Path = SRC) -> set[str]:
    return _found(ast.parse(path.read_text()), path, src)


def stage_of(dotted: str, src: Path = SRC) -> str | None:
    """The stage package a dotted name falls in; None for the root modules."""
    parts = dotted.split(".")
    if len(parts) < 2 or parts[1] in ROOT_MODULES or parts[1] == "__version__":
        return None
    return parts[1] if (src / parts[1]).is_dir() else None


def violations(src: Path = SRC) -> list[str]:
    allowed = packages(src)
    bad = []
    for path in sorted(src.rglob("*.py")):
        first = path.relative_to(src).parts[0]
        own = None if first.endswith(".py") else first
        for dotted in sorted(imports_of(path, src)):
            stage = stage_of(dotted, src)
            if stage is None or stage == own:
                continue
            if own is None:
                if path.name != "__main__.py":
                    bad.append(f"{path.relative_to(src)}: root module imports {dotted}")
            elif stage not in allowed[own]:
                bad.append(f"{path.relative_to(src)}: {own} may not import {dotted}")
    return bad


def cycles(allowed: dict[str, frozenset[str]]) -> list[list[str]]:
    found: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        if node in trail:
            found.append([*trail[trail.index(node) :], node])
            return
        for nxt in sorted(allowed.get(node, ())):
            visit(nxt, [*trail, node])

    for start in allowed:
        visit(start, [])
    return found


def module_cycles(src: Path = SRC) -> list[str]:
    """Import cycles between modules, within a package or across: every import counts, one
    in a function or under `if TYPE_CHECKING:` too (it does not run when the module loads,
    but the two modules still need each other: a cycle a newcomer has to untangle)."""
    mods = {
        ".".join(p.relative_to(src.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in src.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        graph[name] = {d for d in imports_of(path, src) if d in mods and d != name}
    out: list[str] = []
    state: dict[str, int] = {}

    def dfs(n: str, stack: list[str]) -> None:
        state[n] = 1
        for d in sorted(graph[n]):
            if state.get(d) == 1:
                out.append(" -> ".join([*stack[stack.index(d) :], d]))
            elif d not in state:
                dfs(d, [*stack, d])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            dfs(n, [n])
    return out


def test_every_stage_declares_what_it_may_import() -> None:
    assert set(packages()) >= {"log", "shim", "family", "review", "render", "cli"}


def test_no_stage_imports_upwards_or_across() -> None:
    assert violations() == []


def test_the_declared_stages_form_no_cycle() -> None:
    assert cycles(dict(packages())) == []


def test_no_module_import_cycle() -> None:
    assert module_cycles() == []


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    """The checker is not vacuous: a copy of the tree with one upward import fails it."""
    import shutil

    copy = tmp_path / "mcpshim"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert violations(copy) == []
    target = copy / "log" / "execlog.py"
    target.write_text(target.read_text() + "\nfrom mcpshim.review.findings import Finding\n")
    assert violations(copy) == [
        "log/execlog.py: log may not import mcpshim.review.findings",
        "log/execlog.py: log may not import mcpshim.review.findings.Finding",
    ]


@pytest.mark.parametrize(
    "plant",
    [
        "from mcpshim.family.model import Assembler\n",
        "if TYPE_CHECKING:\n    from mcpshim.family.model import Assembler\n",
        "def f() -> None:\n    from mcpshim.family import model\n",
    ],
    ids=["top-level", "type-checking", "in-a-function"],
)
def test_a_cycle_within_a_package_is_caught(tmp_path: Path, plant: str) -> None:
    """The cycle check is not vacuous: family.images importing the model (which imports
    images) fails it, however the import is written."""
    import shutil

    copy = tmp_path / "mcpshim"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert module_cycles(copy) == []
    target = copy / "family" / "images.py"
    target.write_text(target.read_text() + "\nfrom typing import TYPE_CHECKING\n" + plant)
    found = [c.split(" -> ") for c in module_cycles(copy)]
    assert found, "the planted cycle was not found"
    assert all({"mcpshim.family.images", "mcpshim.family.model"} <= set(c) for c in found)


def _package(root: Path, modules: dict[str, str]) -> Path:
    """A small package `mcpshim.pkg` under `root`, one module per entry (dotted under pkg)."""
    src = root / "mcpshim"
    for name, text in {"__init__": "", "pkg.__init__": "", **modules}.items():
        path = src.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return src


def test_the_cycle_check_on_a_small_package(tmp_path: Path) -> None:
    """The checker run on a package built here, not on a copy of the tree: a three-module
    cycle within one package, closed by a relative import, an absolute one and one in a
    function, is found once, whole; the same package without the closing import has none,
    and neither has a module that imports only its own package's __init__."""
    acyclic = {
        "pkg.a": "from . import b\n",
        "pkg.b": "from mcpshim.pkg.c import thing\n",
        "pkg.c": "import mcpshim.pkg\nthing = 1\n",
    }
    assert module_cycles(_package(tmp_path / "ok", acyclic)) == []
    cyclic = {**acyclic, "pkg.c": "thing = 1\n\n\ndef f() -> None:\n    from .a import b\n"}
    assert module_cycles(_package(tmp_path / "bad", cyclic)) == [
        "mcpshim.pkg.a -> mcpshim.pkg.b -> mcpshim.pkg.c -> mcpshim.pkg.a"
    ]
    two = {"pkg.a": "from .b import x\n", "pkg.b": "from mcpshim.pkg import a\nx = 1\n"}
    assert module_cycles(_package(tmp_path / "two", two)) == [
        "mcpshim.pkg.a -> mcpshim.pkg.b -> mcpshim.pkg.a"
    ]


@pytest.mark.parametrize("name", ["errors", "paths"])
def test_root_modules_import_no_stage(name: str) -> None:
    assert not [d for d in imports_of(SRC / f"{name}.py") if stage_of(d)]


MAX_LINES = 450


def test_modules_stay_small_and_the_root_holds_no_stage() -> None:
    """The layout's promise (issue 13): a module a newcomer can read whole, and the top
    of the package holds only the entry points, the error root and the paths."""
    root = sorted(p.name for p in SRC.glob("*.py"))
    assert root == sorted(f"{m}.py" for m in ROOT_MODULES)
    long = {
        str(p.relative_to(SRC)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
