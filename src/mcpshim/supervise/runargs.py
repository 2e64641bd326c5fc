"""The options of `mcpshim run` a prelaunch handled (supervise.runparse, which reads them
before the server starts), typed, as click's `run` hands them to adopt."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpshim.supervise import runparse

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

    @classmethod
    def of(cls, parsed: Mapping[str, Any] | None) -> RunArgs | None:
        """runparse's plain values typed (None stays None)."""
        if parsed is None:
            return None
        dirs = {k: Path(parsed[k]) for k in ("shim_dir", "log_dir") if parsed.get(k) is not None}
        return cls(**{**parsed, **dirs})


def parse_run_args(argv: Sequence[str]) -> RunArgs | None:
    """`mcpshim run`'s arguments (after `run`) as click parses them, or None for anything
    this parser does not take exactly as click would: then click decides, as always."""
    return RunArgs.of(runparse.parse(argv))
