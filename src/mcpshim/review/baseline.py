"""Baselines: what a routine, approved session ran (executables, argument shapes, cwd roots).

`mcpshim baseline save` collects one from the log; `review --baseline` reports everything
outside it as drift (rules MCS115-MCS117). It is the lock's kind of record (what a session
ran: executables, shapes, cwd roots) kept per command instead of per tool, so it is written
and read by the lock's machinery (contract.lockfile: the same escaping, whole-file writes
and key checks; contract.lockmerge's cwd roots), in its own file format (baseline-1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mcpshim.base.fdio import read_regular
from mcpshim.base.tomlfile import Keys, parse_toml
from mcpshim.contract.lockfile import Reader, toml_str, toml_strs, toml_text, write_toml
from mcpshim.contract.lockmerge import roots
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
        roots(cwds),
        session,
        created=datetime.now(timezone.utc).replace(microsecond=0),
        records=n,
    )


def dumps_baseline(base: Baseline) -> str:
    doc: dict[str, Any] = {
        "version": 1,
        "session": toml_str(base.session),
        "records": base.records,
        "cwd_roots": toml_strs(base.cwd_roots),
        "commands": {
            name: {
                "targets": toml_strs(base.executables.get(name, ())),
                "shapes": toml_strs(base.shapes.get(name, ())),
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
    return toml_text(head, doc)


def save_baseline(base: Baseline, path: Path) -> None:
    write_toml(path, dumps_baseline(base), "baseline")


_TOP_KEYS = ("version", "session", "records", "created", "cwd_roots", "commands")
_COMMAND_KEYS = ("targets", "shapes")


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
    r = Reader(lambda key, what: keys.fail(key, f"expected {what}"))
    keys.no_unknown(data, _TOP_KEYS, "")
    if data.get("version") != 1:
        raise keys.fail("version", "expected 1")
    execs: dict[str, tuple[str, ...]] = {}
    shapes: dict[str, tuple[str, ...]] = {}
    for name, table in r.table(data.get("commands", {}), "commands").items():
        r.table(table, f"commands.{name}")
        keys.no_unknown(table, _COMMAND_KEYS, f"commands.{name}.")
        execs[name] = r.strs(table, "targets", f"commands.{name}")
        shapes[name] = r.strs(table, "shapes", f"commands.{name}")
    records, created = data.get("records", 0), data.get("created")
    session = r.text(data, "session", "")
    if not isinstance(records, int) or isinstance(records, bool) or records < 0:
        raise keys.fail("records", "expected a whole number")
    if created is not None and not isinstance(created, datetime):
        raise keys.fail("created", "expected a date and time")
    return Baseline(
        execs, shapes, r.strs(data, "cwd_roots", ""), session, str(path), created, records
    )
