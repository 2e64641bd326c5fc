"""`mcpshim run`'s command line read before click is imported (supervise.launch.prelaunch):
the options a prelaunch handles, taken exactly as click's `run` takes them, or None for
anything else, which click then decides as always (a test holds the two to the same
options over 3,300 command lines)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RunArgs", "parse_run_args"]


@dataclass(frozen=True)
class RunArgs:
    """The options of `mcpshim run` a prelaunch handles, as click's run() receives them."""

    shim_dir: Path | None = None
    log_dir: Path | None = None
    name: str = ""
    sample_ms: int = 100
    on_exit: str = "report"
    grace: float = 5.0
    trace: str = "auto"  # on | auto | off (--no-trace: off)
    zdotdir: bool = True
    mcp: bool = False
    command: tuple[str, ...] = ()


_FLAGS = {"--mcp": ("mcp", True), "--no-trace": ("no_trace", True),
          "--zdotdir": ("zdotdir", True), "--no-zdotdir": ("zdotdir", False)}  # fmt: skip
_VALUED = {"--dir": "shim_dir", "--log-dir": "log_dir", "--name": "name",
           "--sample-ms": "sample_ms", "--on-exit": "on_exit", "--grace": "grace",
           "--trace": "trace", "--on-departure": "on_departure"}  # fmt: skip
_INT = re.compile(r"[0-9]+\Z")
_FLOAT = re.compile(r"[0-9]+(?:\.[0-9]+)?\Z")
_TRISTATE = ("on", "auto", "off")


def parse_run_args(argv: Sequence[str]) -> RunArgs | None:
    """`mcpshim run`'s arguments (after `run`) as click parses them, or None for anything
    this parser does not take exactly as click would: then click decides, as always."""
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


def _checked(got: dict[str, Any], command: Sequence[str] | None) -> RunArgs | None:
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        return None
    if got.pop("on_departure", "report") != "report":
        return None
    no_trace, trace = got.pop("no_trace", False), got.pop("trace", "auto")
    if trace not in _TRISTATE or (no_trace and trace == "on"):
        return None  # (--trace with --no-trace: click's run refuses it)
    if no_trace:
        trace = "off"
    for key in ("shim_dir", "log_dir"):
        if key in got:
            p = got[key]
            if not p or (os.path.exists(p) and not os.path.isdir(p)):
                return None  # click.Path(file_okay=False) refuses a file
            got[key] = Path(p)
    if "sample_ms" in got:
        if not _INT.match(got["sample_ms"]) or int(got["sample_ms"]) < 10:
            return None
        got["sample_ms"] = int(got["sample_ms"])
    if "grace" in got:
        if not _FLOAT.match(got["grace"]):
            return None
        got["grace"] = float(got["grace"])
    if got.get("on_exit", "report") not in ("report", "terminate"):
        return None
    return RunArgs(trace=trace, command=tuple(command), **got)
