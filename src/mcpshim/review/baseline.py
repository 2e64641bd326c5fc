"""Baselines: what a routine, approved session ran (executables, argument shapes, cwd roots).

`mcpshim baseline save` collects one from the log and writes it with tomli-w; `review
--baseline` reports everything outside it as drift (rules MCS115-MCS117).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import tomli_w

from mcpshim.base.fdio import read_regular
from mcpshim.base.safewrite import write_file
from mcpshim.base.tomlfile import Keys, parse_toml
from mcpshim.errors import InputError
from mcpshim.family.tree import Image
from mcpshim.review.shapes import command_name, shape

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
        if not img.entry:
            continue  # ran nothing (a failed exec, a search step): no program to approve
        n += 1
        name = command_name(img)
        known = execs.setdefault(name, set())
        if img.target:  # an exec only its shell's command line shows names no file
            known.add(_text(img.target))
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
    try:
        write_file(path, dumps_baseline(base).encode())
    except OSError as exc:
        raise InputError(f"{path}: cannot write baseline: {exc.strerror}") from None


_TOP_KEYS = ("version", "session", "records", "created", "cwd_roots", "commands")
_COMMAND_KEYS = ("targets", "shapes")


def _strs(keys: Keys, value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise keys.fail(key, "expected a list of strings")
    return tuple(value)


def load_baseline(path: Path) -> Baseline:
    """A baseline file; anything malformed or unknown is an InputError naming the file,
    the line and the key (a misspelt key would otherwise silently allow nothing)."""
    try:
        text = read_regular(path).decode("utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read baseline: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: baseline is not UTF-8 text") from None
    data = parse_toml(text, path, "baseline")
    keys = Keys(path, text, "baseline")
    keys.no_unknown(data, _TOP_KEYS, "")
    if data.get("version") != 1:
        raise keys.fail("version", "expected 1")
    cmds = data.get("commands", {})
    if not isinstance(cmds, dict):
        raise keys.fail("commands", "expected a table")
    execs: dict[str, tuple[str, ...]] = {}
    shapes: dict[str, tuple[str, ...]] = {}
    for name, table in cmds.items():
        if not isinstance(table, dict):
            raise keys.fail(f"commands.{name}", "expected a table")
        keys.no_unknown(table, _COMMAND_KEYS, f"commands.{name}.")
        execs[name] = _strs(keys, table.get("targets", []), f"commands.{name}.targets")
        shapes[name] = _strs(keys, table.get("shapes", []), f"commands.{name}.shapes")
    session, records, created = data.get("session", ""), data.get("records", 0), data.get("created")
    if not isinstance(session, str):
        raise keys.fail("session", "expected a string")
    if not isinstance(records, int) or isinstance(records, bool) or records < 0:
        raise keys.fail("records", "expected a whole number")
    if created is not None and not isinstance(created, datetime):
        raise keys.fail("created", "expected a date and time")
    return Baseline(
        execs,
        shapes,
        _strs(keys, data.get("cwd_roots", []), "cwd_roots"),
        session,
        str(path),
        created,
        records,
    )
