"""`mcpshim run`'s command line read before anything else is imported (supervise.launch.
prelaunch): the options a prelaunch handles, taken exactly as click's `run` takes them, as
plain values, or None for anything else, which click then decides as always (a test holds
the two to the same options over 3,300 command lines). On os alone: what loads here delays
the server's start (supervise.runargs makes the typed RunArgs of it once the server runs).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["DEFAULTS", "parse"]

_FLAGS = {"--mcp": ("mcp", True), "--no-trace": ("no_trace", True),
          "--zdotdir": ("zdotdir", True), "--no-zdotdir": ("zdotdir", False)}  # fmt: skip
_VALUED = {"--dir": "shim_dir", "--log-dir": "log_dir", "--name": "name",
           "--sample-ms": "sample_ms", "--on-exit": "on_exit", "--grace": "grace",
           "--trace": "trace", "--on-departure": "on_departure"}  # fmt: skip
_TRISTATE = ("on", "auto", "off")
#: what an option not given is (click's defaults; RunArgs's fields, by name)
DEFAULTS = {"shim_dir": None, "log_dir": None, "name": "", "sample_ms": 100,
            "on_exit": "report", "grace": 5.0, "trace": "auto", "zdotdir": True,
            "mcp": False}  # fmt: skip


def _digits(s: str) -> bool:
    """[0-9]+ and nothing else (str.isdigit alone takes other scripts' digits too)."""
    return s.isascii() and s.isdigit()


def parse(argv: Sequence[str]) -> dict[str, Any] | None:
    """`mcpshim run`'s arguments (after `run`) as click parses them, every one of RunArgs's
    fields by name (the directories as given, strings), or None for anything this parser
    does not take exactly as click would: then click decides, as always."""
    got: dict[str, Any] = {}
    i, command = 0, None
    while i < len(argv):
        a = argv[i]
        if a == "--":
            command = argv[i + 1 :]
            break
        if not a.startswith("--") or a == "--":
            if a.startswith("-"):
                return None  # -h, a short option, `-`: click's
            command = argv[i:]  # the first argument: COMMAND and its own from here
            break
        name, eq, value = a.partition("=")
        if name in _FLAGS:
            key, flag = _FLAGS[name]
            if eq or key in got:
                return None
            got[key] = flag
        elif name in _VALUED:
            key = _VALUED[name]
            if key in got:
                return None
            if not eq:
                if i + 1 >= len(argv):
                    return None
                nxt = argv[i + 1]
                if name == "--trace" and nxt.startswith("-") and len(nxt) > 1:
                    value = "on"  # an optional value (click's flag_value): the next is an option
                else:
                    value, i = nxt, i + 1
            got[key] = value
        else:
            return None  # --lock, --enforce, --contain, --otlp, --help, or not an option
        i += 1
    return _checked(got, command)


def _checked(got: dict[str, Any], command: Sequence[str] | None) -> dict[str, Any] | None:
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        return None
    if got.pop("on_departure", "report") != "report":
        return None
    no_trace, trace = got.pop("no_trace", False), got.pop("trace", "auto")
    if trace not in _TRISTATE or (no_trace and trace == "on"):
        return None  # (--trace with --no-trace: click's run refuses it)
    got["trace"] = "off" if no_trace else trace
    for key in ("shim_dir", "log_dir"):
        p = got.get(key)
        if key in got and (not p or (os.path.exists(p) and not os.path.isdir(p))):
            return None  # click.Path(file_okay=False) refuses a file
    if "sample_ms" in got:
        if not _digits(got["sample_ms"]) or int(got["sample_ms"]) < 10:
            return None
        got["sample_ms"] = int(got["sample_ms"])
    if "grace" in got:
        whole, dot, part = got["grace"].partition(".")
        if not _digits(whole) or (dot and not _digits(part)):
            return None
        got["grace"] = float(got["grace"])
    if got.get("on_exit", "report") not in ("report", "terminate"):
        return None
    got["command"] = tuple(command)
    return {**DEFAULTS, **got}
