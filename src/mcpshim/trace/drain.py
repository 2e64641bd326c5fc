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
import re
import select
import sys
import time
from pathlib import Path

from mcpshim.base.fdio import write_all
from mcpshim.paths import Locations
from mcpshim.trace.parse import LinePump
from mcpshim.trace.store import TraceParams, summary_payload, write_trace

__all__ = ["Taker", "main"]

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


# ---- a killed supervisor's trace ------------------------------------------------------------

_LINE_START = re.compile(rb"\d+ +\d+\.\d+ ")  # strace -f -ttt: PID SECONDS.USEC ...


class Taker:
    """What the watcher (supervise.watcher) does with a session's trace when `run` is
    killed: it holds the FIFO's read end and the nameless output from its fork on, so
    strace never writes into a FIFO nobody reads (every write an EPIPE and a "Broken
    pipe" line on the client's stderr), drains it into the output as the supervisor did
    (sanitized: parse.sanitize), and once the family is gone records the trace up to the
    kill, in a summary marked `killed`. The output has no name throughout.

    The supervisor's partial last line went with it: a first piece that does not start as
    strace starts its lines is dropped, never read as a line (it could hold an
    environment that no sanitizing saw the start of)."""

    def __init__(self, fifo: int, out: int) -> None:
        self.fifo, self.out = fifo, out
        os.set_blocking(fifo, False)
        self._pump = LinePump()
        self._first = True
        self.eof = False

    def pump(self) -> None:
        """Move what is there now (never waits)."""
        while not self.eof:
            try:
                data = os.read(self.fifo, _CHUNK)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.eof = True
                return
            if self._first:
                self._first = False
                if not _LINE_START.match(data):
                    data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""
            self.out = _write(self.out, self._pump.feed(data))

    def finish(self, loc: Locations, params: TraceParams, strace: str, wait: float) -> None:
        """Drain to the end (strace exits with the last tracee; `wait` at most), then
        record the trace and its summary."""
        from mcpshim.log import eventlog

        deadline = time.monotonic() + wait
        while not self.eof and time.monotonic() < deadline:
            select.select([self.fifo], [], [], 0.05)
            self.pump()
        self.out = _write(self.out, self._pump.flush())
        if self.out < 0:
            return
        trace, gaps = write_trace(loc, Path(f"/proc/self/fd/{self.out}"), params, self.eof, {},
                                  None)  # fmt: skip
        summary = summary_payload(params, strace, trace, gaps, self.eof)
        summary["killed"] = True
        summary["note"] = (
            "`mcpshim run` was killed: its watcher kept the trace up to the kill and "
            "recorded it after ending the family"
        )
        eventlog.append_event(loc, "trace-summary", summary)
