"""Baselines: what a routine, approved session ran (executables, argument shapes, cwd roots).

`mcpshim baseline save` collects one from the log and writes it with tomli-w; `review
--baseline` reports everything outside it as drift (rules MCS115-MCS117).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import tomli_w

from mcpshim.errors import InputError
from mcpshim.family.tree import Image
from mcpshim.review.shapes import command_name, shape

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["Baseline", "collect", "dumps_baseline", "load_baseline", "save_baseline"]


@dataclass(frozen=True)
class Baseline:
    executables: Mapping[str, tuple[str, ...]]  # command -> targets it ran
    shapes: Mapping[str, tuple[str, ...]]  # command -> subcommands / argument shapes
    cwd_roots: tuple[str, ...]
    session: str = ""
    source: str = ""
    created: datetime | None = None
    records: int = 0
    meta: Mapping[str, Any] = field(default_factory=dict)


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _roots(cwds: Iterable[str]) -> tuple[str, ...]:
    """The smallest set of directories that covers every cwd (an ancestor covers its subtree)."""
    out: list[str] = []
    for c in sorted(set(cwds)):
        if not any(c == r or c.startswith(r.rstrip("/") + "/") for r in out):
            out.append(c)
    return tuple(out)


def collect(images: Iterable[Image], session: str = "") -> Baseline:
    """One streaming pass; memory grows with distinct commands, targets, shapes and cwds only."""
    execs: dict[str, set[str]] = {}
    shapes: dict[str, set[str]] = {}
    cwds: set[str] = set()
    n = 0
    for img in images:
        n += 1
        name = command_name(img)
        execs.setdefault(name, set()).add(_text(img.target))
        shapes.setdefault(name, set()).add(shape(img))
        if img.cwd:
            cwds.add(_text(img.cwd))
    return Baseline(
        {k: tuple(sorted(v)) for k, v in sorted(execs.items())},
        {k: tuple(sorted(v)) for k, v in sorted(shapes.items())},
        _roots(cwds),
        session,
        created=datetime.now(timezone.utc).replace(microsecond=0),
        records=n,
    )


def _safe(s: str) -> str:
    """TOML cannot hold lone surrogates (bytes that were not UTF-8): keep them as \\xNN text."""
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def dumps_baseline(base: Baseline) -> str:
    doc: dict[str, Any] = {
        "version": 1,
        "session": base.session,
        "records": base.records,
        "cwd_roots": [_safe(r) for r in base.cwd_roots],
        "commands": {
            name: {
                "targets": [_safe(t) for t in base.executables.get(name, ())],
                "shapes": [_safe(s) for s in base.shapes.get(name, ())],
            }
            for name in sorted(set(base.executables) | set(base.shapes))
        },
    }
    if base.created is not None:
        doc["created"] = base.created
    head = (
        "# mcpshim baseline: what an approved session ran. `mcpshim review --baseline FILE`\n"
        "# reports executables, subcommands/argument shapes and cwds outside it as drift.\n"
    )
    return head + tomli_w.dumps(doc)


def save_baseline(base: Baseline, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(dumps_baseline(base))
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"{path}: cannot write baseline: {exc.strerror}") from None


def _strs(path: Path, value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{path}: baseline key {key}: expected a list of strings")
    return tuple(value)


def load_baseline(path: Path) -> Baseline:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read baseline: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a valid baseline: {exc}") from None
    if data.get("version") != 1:
        raise InputError(f"{path}: baseline key version: expected 1")
    cmds = data.get("commands", {})
    if not isinstance(cmds, dict):
        raise InputError(f"{path}: baseline key commands: expected a table")
    execs: dict[str, tuple[str, ...]] = {}
    shapes: dict[str, tuple[str, ...]] = {}
    for name, table in cmds.items():
        if not isinstance(table, dict):
            raise InputError(f"{path}: baseline key commands.{name}: expected a table")
        execs[name] = _strs(path, table.get("targets", []), f"commands.{name}.targets")
        shapes[name] = _strs(path, table.get("shapes", []), f"commands.{name}.shapes")
    created = data.get("created")
    return Baseline(
        execs,
        shapes,
        _strs(path, data.get("cwd_roots", []), "cwd_roots"),
        str(data.get("session", "")),
        str(path),
        created if isinstance(created, datetime) else None,
        int(data.get("records", 0)),
    )
