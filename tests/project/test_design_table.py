"""docs/design.md's package table names every module (issue 43 item 12): each stage
package has a row, each module of it is named in its "owns" cell (in backticks, by its
name or, under a subpackage such as review/rules/, by its name there), and every
module-like name in a cell is a module of that package, so a module removed or renamed
fails here until the table follows."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.fixtures.home import REPO, SRC

DESIGN = REPO / "docs" / "design.md"
_ROW = re.compile(r"^\| `([a-z]+)/` \| (.*) \| (.*) \|$", re.M)
_NAME = re.compile(r"`([a-z_][a-z0-9_]*(?:/[a-z_][a-z0-9_]*)?)`")


def table(text: str) -> dict[str, set[str]]:
    """Each package row's module-like names (`model`, `rules/execpaths`)."""
    return {m.group(1): set(_NAME.findall(m.group(2))) for m in _ROW.finditer(text)}


def modules(package: Path) -> dict[str, str]:
    """Each module of a package by its path there (`rules/execpaths`) -> its name."""
    return {
        str(p.relative_to(package).with_suffix("")): p.stem
        for p in package.rglob("*.py")
        if p.name != "__init__.py"
    }


def problems(src: Path, text: str) -> list[str]:
    rows = table(text)
    out: list[str] = []
    packages = sorted(p.name for p in src.iterdir() if (p / "__init__.py").is_file())
    out += [f"{name}/: no row" for name in packages if name not in rows]
    out += [f"{name}/: a row for no package" for name in rows if name not in packages]
    for name in packages:
        mods, named = modules(src / name), rows.get(name, set())
        for path, stem in sorted(mods.items()):
            if path not in named and stem not in named:
                out.append(f"{name}/{path}.py: not named in its row")
        known = set(mods) | set(mods.values())
        out += [f"{name}/: `{n}` is no module of it" for n in sorted(named - known)]
    return out


def test_the_table_names_every_module_and_only_modules() -> None:
    assert problems(SRC / "mcpshim", DESIGN.read_text()) == []


def test_a_module_the_table_leaves_out_or_keeps_after_it_went_is_caught(tmp_path: Path) -> None:
    copy = tmp_path / "mcpshim"
    shutil.copytree(SRC / "mcpshim", copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "log" / "newthing.py").write_text('"""A module nobody wrote into the table."""\n')
    (copy / "proc" / "statfds.py").unlink()
    assert problems(copy, DESIGN.read_text()) == [
        "log/newthing.py: not named in its row",
        "proc/: `statfds` is no module of it",
    ]
