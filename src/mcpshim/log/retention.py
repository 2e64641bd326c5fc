"""Bounded logs: size-based rotation and retention, as system loggers offer them (auditd's
max_log_file and num_logs, journald's SystemMaxUse).

The user's config file (paths.config_file(), TOML) holds them:

    [log]
    max_size = "64M"    # rotate the live log once it is this big
    keep = 8            # rotated segments kept
    max_total = "1G"    # every segment and spill file together
    drop_unreviewed = true

`run` applies them when a session starts and ends (and rotates mid-session once the live
log passes max_size); `log rotate --auto` applies them from cron or a systemd timer. The
oldest segments go first. Every drop is said in a `log-dropped` record in the live log
before the file goes: its size, records, sessions and times, whether it was reviewed, and
`reasons` it should have been kept (`drop_reasons`: not reviewed; in a sealed log, not
sealed). With drop_unreviewed = false such segments stay, over the limits.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mcpshim.base.fdio import read_regular
from mcpshim.base.tomlfile import without_bom
from mcpshim.errors import InputError, McpshimError
from mcpshim.log import marks, sessionindex
from mcpshim.log.eventlog import log_lock
from mcpshim.log.execlog import segments
from mcpshim.log.rotation import Describe, Dropping, check_segments, rotate_locked
from mcpshim.paths import Locations, config_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "LogSettings",
    "Outcome",
    "SizeWatch",
    "Unsealed",
    "after_session",
    "apply",
    "describer",
    "drop_reasons",
    "load_settings",
    "parse_size",
]

MIB = 1 << 20
#: whether a segment holds bytes no seal covers (the cli asks mcpshim.seal; log may not)
Unsealed = Callable[[Path], bool]
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.I)


def parse_size(value: Any, key: str, source: str) -> int | None:
    """Bytes from 1048576, "64M", "1.5 GiB"; false: no limit."""
    if value is False:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    m = _SIZE.match(value) if isinstance(value, str) else None
    if m is None:
        raise InputError(f"{source}: [log] {key}: not a size: {value!r} (e.g. 64M, 1G, false)")
    power = " kmgt".index(m.group(2).lower() or " ")
    return int(float(m.group(1)) * 1024**power)


@dataclass(frozen=True)
class LogSettings:
    max_size: int | None = 64 * MIB
    keep: int | None = 8
    max_total: int | None = 1024 * MIB
    drop_unreviewed: bool = True
    source: str = "defaults"  # or the config file read


def load_settings(path: Path | None = None) -> LogSettings:
    """The [log] table of the config file; the defaults when there is none."""
    path = path or config_file()
    try:
        data = tomllib.loads(without_bom(read_regular(path).decode("utf-8")))
    except FileNotFoundError:
        return LogSettings()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{path}: not a valid config file: {exc}") from None
    table = data.get("log", {})
    if not isinstance(table, dict):
        raise InputError(f"{path}: [log] must be a table")
    unknown = set(table) - {"max_size", "keep", "max_total", "drop_unreviewed"}
    if unknown:
        raise InputError(f"{path}: [log]: unknown key(s) {', '.join(sorted(unknown))}")
    base = LogSettings()
    keep = table.get("keep", base.keep)
    if keep is not False and (not isinstance(keep, int) or isinstance(keep, bool) or keep < 0):
        raise InputError(f"{path}: [log] keep: a number of segments (0 or more) or false")
    drop = table.get("drop_unreviewed", True)
    if not isinstance(drop, bool):
        raise InputError(f"{path}: [log] drop_unreviewed: true or false")
    src = str(path)
    return LogSettings(
        parse_size(table.get("max_size", base.max_size), "max_size", src),
        None if keep is False else keep,
        parse_size(table.get("max_total", base.max_total), "max_total", src),
        drop,
        src,
    )


def drop_reasons(
    path: Path,
    entry: Mapping[str, Any] | None,
    reviews: list[marks.Review],
    unsealed: Unsealed | None = None,
) -> list[str]:
    """Why a segment should be kept; [] when it may go: no review read all of it, or (a
    sealed log: `unsealed`, from the sealer's state) no seal covers all of it."""
    reasons: list[str] = []
    if unsealed is not None and unsealed(path):
        reasons.append("not sealed")
    if entry is not None and entry["offset"] < path.stat().st_size:
        entry = None  # not all indexed: only a whole-log review can vouch for it
    sessions = list(entry["sessions"]) if entry else []
    outside = entry["other"] if entry else 1
    if not marks.reviewed(path, sessions, outside, reviews):
        reasons.append("not reviewed")
    return reasons


def _iso(t: float | None) -> str | None:
    try:
        return None if t is None else datetime.fromtimestamp(t, tz=timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


@dataclass
class _Describer:
    loc: Locations
    index: sessionindex.Index | None
    reviews: list[marks.Review]
    unsealed: Unsealed | None = None
    reasons: dict[Path, list[str]] = field(default_factory=dict)

    def why_keep(self, path: Path) -> list[str]:
        if path not in self.reasons:
            entry = self.index.entry_for(path) if self.index else None
            self.reasons[path] = drop_reasons(path, entry, self.reviews, self.unsealed)
        return self.reasons[path]

    def __call__(self, path: Path, rule: str) -> dict[str, Any]:
        entry = self.index.entry_for(path) if self.index else None
        size = path.stat().st_size
        out: dict[str, Any] = {
            "time": datetime.now(timezone.utc).isoformat(),
            "segment": path.name,
            "size": size,
            "rule": rule,
            "reasons": self.why_keep(path),
            "reviewed": "not reviewed" not in self.why_keep(path),
            "sealed": None if self.unsealed is None else "not sealed" not in self.why_keep(path),
        }
        if entry is None or entry["offset"] < size:
            out["indexed"] = False  # what it held is not known past this
        if entry is not None:
            parts = entry["sessions"]
            firsts = [p["first"] for p in parts.values() if p["first"] is not None]
            lasts = [p["last"] for p in parts.values() if p["last"] is not None]
            out.update(
                records=entry["records"],
                outside_sessions=entry["other"],
                sessions=sorted(parts)[:50],
                sessions_total=len(parts),
                first=_iso(min(firsts, default=None)),
                last=_iso(max(lasts, default=None)),
            )
        return out


def describer(
    loc: Locations, index: sessionindex.Index | None, unsealed: Unsealed | None = None
) -> Describe:
    """What a `log-dropped` record says about a segment, from the index and review marks."""
    return _Describer(loc, index, marks.load_reviews(loc), unsealed)


@dataclass(frozen=True)
class Outcome:
    rotated: Path | None
    dropped: list[Path]
    kept: list[tuple[Path, list[str]]]  # over a limit, kept (drop_unreviewed = false)


def _spill_total(loc: Locations) -> int:
    try:
        return sum(p.stat().st_size for p in loc.spill_dir.iterdir() if p.is_file())
    except OSError:
        return 0


def apply(
    loc: Locations,
    settings: LogSettings,
    index: sessionindex.Index | None = None,
    unsealed: Unsealed | None = None,
) -> Outcome:
    """Rotate when the live log reached max_size, then drop the oldest segments while more
    than `keep` are left or all together pass max_total."""
    describe = _Describer(loc, index, marks.load_reviews(loc), unsealed)
    kept: list[tuple[Path, list[str]]] = []
    with log_lock(loc):
        check_segments(loc)
        new = None
        live = loc.log_file.stat().st_size if loc.log_file.exists() else 0
        if settings.max_size is not None and live >= max(settings.max_size, 1):
            new = rotate_locked(loc)
        rotated = [p for p in segments(loc) if p != loc.log_file]
        sizes = {p: p.stat().st_size for p in rotated}
        total = sum(sizes.values()) + (loc.log_file.stat().st_size if loc.log_file.exists() else 0)
        total += _spill_total(loc)
        left = len(rotated)
        dropping = Dropping(loc, describe)
        for old in rotated:
            over_keep = settings.keep is not None and left > settings.keep
            over_total = settings.max_total is not None and total > settings.max_total
            if not (over_keep or over_total):
                break
            reasons = describe.why_keep(old)
            if reasons and not settings.drop_unreviewed:
                kept.append((old, reasons))
                continue
            rule = f"keep {settings.keep}" if over_keep else f"max_total {settings.max_total}"
            before = _spill_total(loc)
            dropping.drop(old, rule)
            left -= 1
            total -= sizes[old] + before - _spill_total(loc)
        dropping.close()
    return Outcome(new, dropping.removed, kept)


class SizeWatch:
    """A `run` tick hook: every few seconds, rotate once the live log reached max_size (a
    rename under the lock; dropping segments waits for the session's end)."""

    def __init__(self, loc: Locations, max_size: int, every: float = 5.0) -> None:
        self.loc, self.max_size, self.every = loc, max(max_size, 1), every
        self._next = time.monotonic() + every

    def __call__(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.every
        try:
            if self.loc.log_file.stat().st_size >= self.max_size:
                with log_lock(self.loc, timeout=1.0):
                    if self.loc.log_file.stat().st_size >= self.max_size:
                        check_segments(self.loc)
                        rotate_locked(self.loc)
        except (OSError, TimeoutError, McpshimError):
            pass  # the next check, or the session's end, tries again


def after_session(
    loc: Locations,
    settings: LogSettings,
    unsealed: Unsealed | None = None,
    budget: int = 64 * MIB,
) -> str:
    """At a session's end: the index brought up to date (at most `budget` new bytes, never
    waiting long for another updater), then retention. Returns a warning, or ""."""
    try:
        index = sessionindex.update(loc, budget=budget, wait=1.0)
        apply(loc, settings, index, unsealed)
    except (OSError, TimeoutError, McpshimError) as exc:
        return f"log retention: {exc}"
    return ""
