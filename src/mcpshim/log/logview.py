"""Views of log records: filtering and the text, JSON and ECS shapes `mcpshim log` prints.

JSON escape for non-UTF-8 bytes (docs/log-format.md): text fields hold the UTF-8
reading of the bytes (U+FFFD where a byte is invalid); whenever a field is not valid UTF-8,
a sibling `<field>_b64` holds its exact bytes in base64 (for `args`, an object mapping each
such argument's index to its bytes).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from mcpshim.base.display import b64_fields, escape, json_text, quote_arg, quote_argv
from mcpshim.errors import UsageError
from mcpshim.log.execlog import EventRecord, Record

__all__ = [
    "LOG_SCHEMA_ID",
    "Filter",
    "argv_fields",
    "cwd_text",
    "entity_id",
    "parse_since",
    "record_json",
    "record_text",
    "select",
]

LOG_SCHEMA_ID = "mcpshim.log/1"
_REL = re.compile(r"^(\d{1,18})([smhd])$")


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """ISO 8601 (UTC when no offset is given) or a relative age: 30s, 10m, 2h, 7d."""
    now = now or datetime.now(timezone.utc)
    m = _REL.match(text.strip())
    if m:
        n, unit = int(m.group(1)), m.group(2)
        unit_name = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[unit]
        try:
            return now - timedelta(**{unit_name: n})
        except OverflowError:
            raise UsageError(f"--since: {text!r} reaches back before the year 1") from None
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since: not a time: {text!r} (ISO 8601, or 30s/10m/2h/7d)") from None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def entity_id(boot_id: str, pid: int | None, start: int | None) -> str:
    """A stable process identity: the same process gives the same id in every record."""
    basis = f"{boot_id}:{pid}:{start if start is not None else ''}"
    return hashlib.sha256(basis.encode()).hexdigest()[:32]


def argv_fields(name: str, argv: Sequence[bytes]) -> dict[str, Any]:
    """An argv as the log stores it: redacted text, exact bytes of non-UTF-8 items in b64."""
    from mcpshim.log.redact import redact_argv  # here: the log's readers never redact

    red = redact_argv(list(argv))
    out: dict[str, Any] = {name: [json_text(a) for a in red.argv]}
    out.update(b64_fields({name: red.argv}))
    if red.rules:
        out[f"{name}_redacted"] = sorted(set(red.rules))
    return out


@dataclass(frozen=True)
class Filter:
    session: str | None = None
    since: datetime | None = None
    pid: int | None = None

    def accepts(self, rec: Record) -> bool:
        if isinstance(rec, EventRecord):
            data = rec.data
            if self.session is not None and data.get("session") != self.session:
                return False
            if self.pid is not None and data.get("pid") != self.pid:
                return False
            if self.since is not None:
                t = data.get("time")
                return isinstance(t, str) and _iso(t) >= self.since
            return True
        if self.session is not None and rec.session != self.session:
            return False
        if self.pid is not None and rec.pid != self.pid:
            return False
        if self.since is not None:
            t = rec.time
            return t is not None and t >= self.since
        return True


def _iso(text: str) -> datetime:
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def select(records: Iterable[Record], flt: Filter) -> Iterator[Record]:
    return (r for r in records if flt.accepts(r))


def _ts(t: datetime | None) -> str | None:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" if t else None


def record_json(rec: Record) -> dict[str, Any]:
    if isinstance(rec, EventRecord):
        return {"schema": LOG_SCHEMA_ID, "kind": rec.kind, "where": rec.where, **dict(rec.data)}
    out: dict[str, Any] = {
        "schema": LOG_SCHEMA_ID,
        "kind": rec.kind,
        "where": rec.where,
        "time": _ts(rec.time),
        "boot_id": rec.boot_id,
        "pid": rec.pid,
        "ppid": rec.ppid,
        "start_ticks": rec.start,
        "start_time": _ts(rec.start_time),
        "parent_start_ticks": rec.parent_start,
        "entity_id": entity_id(rec.boot_id, rec.pid, rec.start),
        "cwd": json_text(rec.cwd) if not rec.cwd_unknown else None,
        "shim": rec.shim,
        "target": json_text(rec.target),
        "invoked_as": json_text(rec.invoked_as),
        "session": rec.session or None,
        "path": json_text(rec.path),
        "redacted": list(rec.redactions),
        "args": [json_text(a) for a in rec.args],
        # the shell line that started this process (kept by its first shimmed child), and
        # its argv exactly when the shim kept it whole
        "parent_cmdline": json_text(rec.parent_cmdline) if rec.parent_cmdline else None,
        "parent_argv": [json_text(a) for a in rec.parent_argv] if rec.parent_argv else None,
    }
    if rec.cwd_unknown:
        out["cwd_unknown"] = rec.cwd_unknown
    out.update(
        b64_fields(
            {
                "cwd": rec.cwd,
                "target": rec.target,
                "invoked_as": rec.invoked_as,
                "path": rec.path,
                "args": rec.args,
                "parent_cmdline": rec.parent_cmdline,
                "parent_argv": rec.parent_argv,
            }
        )
    )
    return out


def cwd_text(cwd: bytes, unknown: str) -> str:
    """A cwd for the terminal; one the shim could not resolve is `?(why)`, never blank."""
    return f"?({unknown})" if unknown else escape(cwd)


def record_text(rec: Record) -> str:
    if isinstance(rec, EventRecord):
        t = rec.data.get("time", "")
        if rec.kind == "seal":  # its hashes and MAC are for `log verify`, not for reading
            d = rec.data
            detail = f"n={d.get('n')} segment={d.get('segment')} {d.get('start')}..{d.get('end')}"
            return f"{escape(str(t)):24} {'-':>7} {'-':>7} {rec.kind:10} {escape(detail)}"
        detail = " ".join(
            f"{k}={escape(str(v))}"
            for k, v in sorted(rec.data.items())
            if k not in ("time",) and not isinstance(v, (dict, list))
        )
        return f"{escape(str(t)):24} {'-':>7} {'-':>7} {rec.kind:10} {detail}"
    t = _ts(rec.time) or "?"
    sess = escape(rec.session) if rec.session else "-"
    parent = ""
    if rec.parent_argv:
        parent = f"  started by {quote_argv(rec.parent_argv)}"
    elif rec.parent_cmdline:
        parent = f"  started by {quote_arg(rec.parent_cmdline)}"
    return (
        f"{t:24} {rec.pid:>7} {rec.ppid if rec.ppid is not None else '?':>7} "
        f"{escape(rec.shim):10} {sess:10} {cwd_text(rec.cwd, rec.cwd_unknown)}  "
        f"{quote_argv([os.path.basename(rec.invoked_as) or rec.invoked_as, *rec.args])}{parent}"
    )


TEXT_HEADER = f"{'TIME (UTC)':24} {'PID':>7} {'PPID':>7} {'SHIM':10} {'SESSION':10} CWD  COMMAND"
