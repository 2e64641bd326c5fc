"""The PATH each traced exec passed, and nothing else of its environment.

strace -v prints every variable of every exec; parse.sanitize must cut each such line down
to its PATH strings without changing anything else the parser reads, whatever the shape of
the line and however the pipe's bytes are chunked.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mcpshim.trace.drain import drain
from mcpshim.trace.parse import LinePump, parse_line, parse_output, sanitize
from mcpshim.trace.probe import trace_unavailable
from mcpshim.trace.run import is_gone, tracer_of
from mcpshim.trace.strace import strace_argv

STRACE = shutil.which("strace")
needs_trace = pytest.mark.skipif(
    not sys.platform.startswith("linux") or STRACE is None or trace_unavailable(None)[0] is None,
    reason="needs Linux with strace allowed to trace its children",
)
SECRET = "tok-3f9a1c7e5b2d-very-secret"
ENV = {
    "PATH": "/usr/bin:/bin",
    "API_TOKEN": SECRET,
    "GRPC_ROOTS_FILE_PATH": SECRET + "-path",  # ends in PATH=: not the PATH
    "XPATH": SECRET + "-x",
    "LANG": "C",
}


def hexed(text: str) -> bytes:
    return b"".join(b"\\x%02x" % c for c in text.encode())


def raw_trace(tmp_path: Path, script: str) -> list[bytes]:
    """strace -v output of `sh -c script` with ENV, as lines (the secret is a fake)."""
    assert STRACE is not None
    out = tmp_path / "raw.out"
    proc = subprocess.Popen(strace_argv(STRACE, str(out), ["/bin/sh", "-c", script]), env=ENV)
    tracer = 0
    deadline = time.monotonic() + 10
    while not tracer and time.monotonic() < deadline and proc.poll() is None:
        tracer = tracer_of(proc.pid) or 0
    proc.wait(timeout=60)
    while tracer and not is_gone(tracer) and time.monotonic() < deadline:
        time.sleep(0.002)
    return out.read_bytes().splitlines(keepends=True)


SCRIPT = (
    "/bin/true; env -i /bin/true; env PATH=/opt/x:/usr/bin /bin/true; "
    "env -u PATH /bin/true; exec /bin/true"
)


@needs_trace
def test_sanitize_keeps_path_and_changes_nothing_else(tmp_path: Path) -> None:
    lines = raw_trace(tmp_path, SCRIPT)
    raw = b"".join(lines)
    assert hexed(SECRET) in raw  # strace -v did print the environment
    clean = [sanitize(ln.rstrip(b"\n")) for ln in lines]
    joined = b"\n".join(clean)
    assert hexed(SECRET[:8]) not in joined and SECRET.encode() not in joined
    # Everything the parser reads is the same, but the environment: PATH only.
    for before, after in zip(lines, clean, strict=True):
        tid, _, rest = before.rstrip(b"\n").lstrip().partition(b" ")
        a = parse_line(int(tid), rest.lstrip())
        b = parse_line(int(tid), after.lstrip().partition(b" ")[2].lstrip())
        assert a == b, (before, after)
    events = [e for evs in parse_output(iter(c + b"\n" for c in clean)).values() for e in evs]
    paths = [(e.filename, e.env_path, e.env_known) for e in events if e.kind == "exec"]
    trues = [p for p in paths if p[0] == b"/bin/true"]
    assert (b"/bin/true", b"/usr/bin:/bin", True) in trues
    assert (b"/bin/true", None, True) in trues  # env -i, env -u PATH: no PATH at all
    assert (b"/bin/true", b"/opt/x:/usr/bin", True) in trues


@needs_trace
def test_any_chunking_of_the_pipe_gives_the_same_lines(tmp_path: Path) -> None:
    lines = raw_trace(tmp_path, SCRIPT)
    raw = b"".join(lines)
    whole = b"".join(sanitize(ln.rstrip(b"\n")) + b"\n" for ln in lines)
    rnd = random.Random(7)
    for _ in range(20):
        pump = LinePump()
        got = []
        i = 0
        while i < len(raw):
            n = rnd.choice([1, 2, 7, 64, 4096, 1 << 16])
            got.append(pump.feed(raw[i : i + n]))
            i += n
        got.append(pump.flush())
        assert b"".join(got) == whole


def test_lines_of_other_shapes_never_keep_a_value() -> None:
    secret = hexed("SECRET=" + SECRET)
    path = hexed("PATH=/a:/b")
    head = b"4242  1700000000.000001 "
    shapes = [
        # execveat with a dirfd and flags after the environment
        head
        + b"execveat(3<"
        + hexed("/usr/bin")
        + b'>, "'
        + hexed("git")
        + b'", ["'
        + hexed("git")
        + b'"], ["'
        + secret
        + b'", "'
        + path
        + b'"], 0) = 0',
        # the entry half of a split line
        head
        + b'execve("'
        + hexed("/bin/x")
        + b'", ["'
        + hexed("x")
        + b'"], ["'
        + path
        + b'", "'
        + secret
        + b'"] <unfinished ...>',
        # argv strace could not read, environment it could
        head + b'execve("' + hexed("/bin/x") + b'", 0x1234, ["' + secret + b'"]) = -1 EFAULT',
        # an array cut short (...) and an unterminated line
        head + b'execve("' + hexed("/bin/x") + b'", ["' + hexed("x") + b'", ...], ["' + secret,
        head + b'execve("' + hexed("/bin/x") + b'"' + b', ["' + secret,
        head + b'execve("' + hexed("/bin/x") + b'", [], ["' + secret + b'" <unfinished ...>',
        # fexecve of a memfd: its fd is an unlinked file, `(deleted)` after the path
        head
        + b"execveat(3<"
        + hexed("/memfd:payload")
        + b'>(deleted), "", ["'
        + hexed("payload")
        + b'"], ["'
        + secret
        + b'", "'
        + path
        + b'"], AT_EMPTY_PATH) = 0',
    ]
    for line in shapes:
        out = sanitize(line)
        assert hexed(SECRET[:8]) not in out, out
    ev = parse_line(4242, sanitize(shapes[0])[len(b"4242  ") :])
    assert ev is not None and ev.env_path == b"/a:/b" and ev.result == "ok"
    assert sanitize(shapes[1]).endswith(b"<unfinished ...>")
    assert path in sanitize(shapes[1])
    assert sanitize(shapes[-2]).endswith(b"execve(?) <unfinished ...>")  # not understood
    memfd = parse_line(4242, sanitize(shapes[-1])[len(b"4242  ") :])
    assert memfd is not None and memfd.dirfd_path == b"/memfd:payload"
    assert memfd.env_path == b"/a:/b" and memfd.result == "ok"
    # Lines that are not exec calls pass unchanged.
    other = head + b"clone(child_stack=NULL, flags=SIGCHLD) = 4243"
    assert sanitize(other) == other


@needs_trace
def test_probe_prints_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # The probe runs the session's command line (-v) on /bin/true: with an empty
    # environment, so mcpshim's own variables never reach what strace prints (into a
    # pipe of the probe's: no file holds it).
    monkeypatch.setenv("MCPSHIM_PROBE_SECRET", SECRET)
    from mcpshim.trace.probe import Probe

    assert STRACE is not None
    started = Probe(STRACE)
    assert started.why_not() == ""
    assert b"execve(" in started.output  # (what it printed, read)
    assert hexed(SECRET[:8]) not in started.output and b"PROBE_SECRET" not in started.output


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_the_drain_reads_on_when_its_file_is_full() -> None:
    # A survivor's tracer writes into the FIFO until its last tracee ends: a drain that
    # stopped reading at ENOSPC would leave the FIFO full and stop every survivor in strace.
    r, w = os.pipe()
    full = os.open("/dev/full", os.O_WRONLY)
    line = b'123 1.0 execve("\\x2f", [], ["\\x50\\x41\\x54\\x48\\x3d"]) = 0\n'
    data = line * 5000  # several times a pipe's buffer: the writer waits for the reads

    def write() -> None:
        with open(w, "wb", closefd=True) as fh:
            fh.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert drain(r, full, LinePump()) == -1
    finally:
        writer.join(timeout=30)
        os.close(r)
        os.close(full)
    assert not writer.is_alive()  # all of it was read
