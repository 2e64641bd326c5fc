"""The drain of a traced session's survivors: `python -m mcpshim.trace.drain SHIMS LOG PARAMS`.

When `run --trace` ends with survivors still traced (`--on-exit report`), strace keeps
writing their events into its FIFO after the supervisor is gone. This process, started by
trace.run with the session's partial last line on its stdin, the FIFO on fd 3 and the
session's nameless output file on fd 4, reads both to their end (strace exits when the
last tracee does) and appends the lines to the file cut down like the supervisor's
(parse.sanitize: of each exec's environment only PATH). Then it records what the session
could not: the survivors' later execs (trace.store.write_trace, `late`). The file has no
name: it goes when this process does, however it ends.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcpshim.base.fdio import write_all
from mcpshim.paths import Locations
from mcpshim.trace.parse import LinePump
from mcpshim.trace.store import TraceParams, write_trace

__all__ = ["main"]

_CHUNK = 1 << 20
_OUT = 4


def drain(src: int, out: int, pump: LinePump) -> int:
    """Read src to its end; a write that fails (a full disk) stops the writing, never the
    reading (strace would stop the survivors on a full FIFO). The fd still written, or -1."""
    while data := os.read(src, _CHUNK):
        out = _write(out, pump.feed(data))
    return out


def _write(out: int, lines: bytes) -> int:
    if out >= 0:
        try:
            write_all(out, lines)
        except OSError:
            return -1
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m mcpshim.trace.drain SHIM_DIR LOG_DIR PARAMS", file=sys.stderr)
        return 2
    pump = LinePump()
    out = drain(0, _OUT, pump)
    os.set_blocking(3, True)
    out = drain(3, out, pump)
    out = _write(out, pump.flush())
    if not argv[2]:
        return 0
    loc = Locations(Path(argv[0]), Path(argv[1]))
    try:
        write_trace(loc, Path(f"/proc/self/fd/{_OUT}"), TraceParams.decode(argv[2]), True, {},
                    None, late=True)  # fmt: skip
    except (OSError, ValueError) as exc:  # a full disk, a log gone: say so, once
        print(f"mcpshim: warning: the survivors' late execs were not recorded: {exc}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
