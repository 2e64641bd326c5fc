"""What an event record (a Python writer's JSON field) may hold, checked as it is read.

Readers (tree, review, report, attribution) take an event's fields as mcpshim wrote them.
A record that is well framed but holds something else -- JSON that is not one object, a
NaN or an infinity, a lone surrogate, nesting deeper than any writer makes, or a field a
reader relies on with the wrong type (`"pid": "x"`, `"alive": 5`) -- is refused here with
a ValueError, so the reader skips it and reports it like a torn record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MAX_EVENT_DEPTH", "event_data"]

#: levels of nesting an event record may hold (mcpshim's own are a few; a relayed tool
#: call's arguments are cut well before this)
MAX_EVENT_DEPTH = 64


Check = Callable[[Any], bool]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _strs(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _opt(check: Check) -> Check:
    return lambda v: v is None or check(v)


def _either(*checks: Check) -> Check:
    return lambda v: any(c(v) for c in checks)


def _alive(v: Any) -> bool:
    """[[pid, start ticks or null], ...] (the family after a response)."""
    return isinstance(v, list) and all(
        isinstance(p, list) and len(p) == 2 and _int(p[0]) and (p[1] is None or _int(p[1]))
        for p in v
    )


def _listed(v: Any) -> bool:
    """A listing page: [{"name": text or null, "sha256": text, ...}, ...]."""
    return isinstance(v, list) and all(
        isinstance(i, dict) and "name" in i and _OPT_STR(i["name"]) and _OPT_STR(i.get("sha256"))
        for i in v
    )


def _queries(v: Any) -> bool:
    """trace-net's DNS questions: [{"name": text, "type": text, "name_b64"?: text}, ...]."""
    return isinstance(v, list) and all(
        isinstance(q, dict)
        and _str(q.get("name"))
        and _str(q.get("type"))
        and _OPT_STR(q.get("name_b64"))
        for q in v
    )


def _b64(v: Any) -> bool:
    """A field's exact bytes: base64 text, or for a list {index: base64}."""
    return _str(v) or (isinstance(v, dict) and all(_str(x) for x in v.values()))


_OPT_INT, _OPT_STR, _OPT_STRS = _opt(_int), _opt(_str), _opt(_strs)
_OPT_BOOL = _opt(lambda v: isinstance(v, bool))
_OPT_NUMBER = _opt(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
#: the fields some reader relies on, in any kind of event, and what each may hold
_FIELDS: dict[str, tuple[Check, str]] = {
    "session": (_str, "text"),
    "time": (_str, "text"),
    "alive_time": (_str, "text"),
    "boot_id": (_str, "text"),
    "pid": (_int, "an integer"),
    **dict.fromkeys(
        ("ppid", "start", "parent_start", "child_pid", "child_start", "uid", "exit_status",
         "error_code", "size", "survivors", "execs", "failed", "gaps", "processes",
         "last_pid", "port", "local_port", "count", "net", "socket", "files", "part"),
        (_OPT_INT, "an integer or null"),
    ),
    **dict.fromkeys(
        ("cmdline", "command", "argv", "credential_env", "cmdline_redacted",
         "command_redacted", "argv_redacted"),
        (_OPT_STRS, "a list of text or null"),
    ),
    **dict.fromkeys(
        ("exe", "parent_exe", "cwd", "filename", "path", "name", "direction", "method", "tool",
         "prompt", "uri", "reason", "proto", "laddr", "raddr", "action", "result", "via_shim",
         "transport", "user", "platform", "cursor", "next_cursor", "server_name",
         "server_version", "protocol_version", "client_name", "client_version",
         "instructions", "sha256", "server_sha256", "approved_sha256", "listed_sha256",
         "lock", "server", "what", "source", "where", "blocked", "call", "family",
         "address", "local_address", "outcome", "errno", "settled", "last_time", "purpose",
         "lossy"),
        (_OPT_STR, "text or null"),
    ),
    **dict.fromkeys(
        ("is_error", "terminated", "subreaper", "complete", "search", "shim_script",
         "shim_helper", "late", "ended", "abstract", "nonblocking"),
        (_OPT_BOOL, "true, false or null"),
    ),
    "duration_s": (_OPT_NUMBER, "a number or null"),
    "status": (_opt(_either(_int, _str)), "an integer, text or null"),  # reaped; socket
    "signal": (_opt(_either(_int, _str)), "a signal name, number or null"),
    "alive": (_alive, "a list of [pid, start] pairs"),
    **dict.fromkeys(("tools", "resources", "prompts"), (_listed, "a list of named items")),
    "queries": (_queries, "a list of DNS questions"),
    "capabilities": (_opt(lambda v: isinstance(v, dict)), "an object or null"),
}  # fmt: skip


_NONE = type(None)
#: the fields whose check is their value's type alone, by the types it may have: most of a
#: record's fields, checked without a call (a reader decodes every record it reads)
_BY_CHECK: dict[Check, tuple[type, ...]] = {
    _str: (str,), _int: (int,), _OPT_STR: (str, _NONE), _OPT_INT: (int, _NONE),
    _OPT_BOOL: (bool, _NONE),
}  # fmt: skip
_TYPES = {key: _BY_CHECK[check] for key, (check, _w) in _FIELDS.items() if check in _BY_CHECK}


def _check_fields(data: Mapping[str, Any]) -> None:
    for key, value in data.items():
        if type(value) in _TYPES.get(key, ()):  # (exact: JSON gives no subclass; bool no int)
            continue
        rule = _FIELDS.get(key)
        if rule is None and key.endswith("_b64"):
            rule = (_b64, "base64 text")
        if rule is not None and not rule[0](value):
            shown = type(value).__name__ if value is not None else "null"
            raise ValueError(f"event record field {key!r} holds {shown}, not {rule[1]}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text[:20]} is out of range")
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)


def _depth(value: Any) -> int:
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            todo += [(c, d + 1) for c in (v.values() if isinstance(v, dict) else v)]
    return deepest


def event_data(raw: bytes) -> dict[str, Any]:
    """An event record's JSON, if it is what mcpshim writes: one object of finite numbers,
    Unicode text and at most MAX_EVENT_DEPTH levels. Anything else (`[1,2]`, `null`, NaN,
    1e999, a lone surrogate, 100,000 levels) raises ValueError: the record is skipped and
    reported like a torn one, rather than reaching code that expects an object."""
    try:  # (json.loads, without a decoder made for each record)
        data = _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    except RecursionError:
        raise ValueError("event record nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError(f"event record holds a JSON {type(data).__name__}, not an object")
    if raw.count(b"[") + raw.count(b"{") > MAX_EVENT_DEPTH and _depth(data) > MAX_EVENT_DEPTH:
        raise ValueError(f"event record nested deeper than {MAX_EVENT_DEPTH} levels")
    if b"\\u" in raw or b"\xed" in raw:  # an escape, or UTF-8 bytes json lets through
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("event record holds a lone surrogate (not Unicode text)") from None
    _check_fields(data)
    return data
