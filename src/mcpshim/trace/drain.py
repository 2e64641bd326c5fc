"""The drain of a traced session's survivors: `python -m mcpshim.trace.drain OUTPUT`.

When `run --trace` ends with survivors still traced (`--on-exit report`), strace keeps
writing their events into its FIFO after the supervisor is gone. This process, started by
trace.run with the session's partial last line on its stdin and the FIFO on fd 3, reads
both to their end (strace exits when the last tracee does) and appends the lines to OUTPUT
cut down like the supervisor's (parse.sanitize: of each exec's environment only PATH).
"""

from __future__ import annotations

import os
import sys

from mcpshim.base.fdio import write_all
from mcpshim.trace.parse import LinePump

__all__ = ["main"]

_CHUNK = 1 << 20


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
    if len(argv) != 1:
        print("usage: python -m mcpshim.trace.drain OUTPUT", file=sys.stderr)
        return 2
    out = os.open(argv[0], os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    pump = LinePump()
    out = drain(0, out, pump)
    os.set_blocking(3, True)
    out = drain(3, out, pump)
    _write(out, pump.flush())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
