"""chmod, chown and utime as strace prints them (issue 39 item 4), from a real strace over
a real process: every form a program may use (by path, by fd, under a directory fd, the
fd's own file), each with the file it changed and the result."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from mcpshim.trace.metaparse import META_SYSCALLS
from mcpshim.trace.parse import read_output
from mcpshim.trace.strace import SYSCALLS, build_trace
from tests.fixtures.runhelp import needs_trace

CHILD = r"""
import os, sys
d = sys.argv[1]
f = os.path.join(d, "f")
open(f, "w").close()
os.chdir(d)
os.chmod(f, 0o4755)                          # chmod / fchmodat
os.chmod("f", 0o700)                         # relative: the process's cwd
fd = os.open(f, os.O_RDONLY)
os.fchmod(fd, 0o644)                         # by fd
os.utime(fd, (1, 1))                         # utimensat(fd, NULL, ...)
dfd = os.open(d, os.O_RDONLY)
os.chmod("f", 0o600, dir_fd=dfd)             # under a directory fd
os.chown(f, os.getuid(), os.getgid())
os.utime(f, (2, 2))
try:
    os.chmod(os.path.join(d, "missing"), 0o777)
except OSError:
    pass
"""


@needs_trace
def test_every_form_names_its_file(tmp_path: Path) -> None:
    strace = shutil.which("strace")
    assert strace is not None
    out = tmp_path / "trace"
    d = tmp_path / "d"
    d.mkdir()
    argv = [strace, "-f", "-qq", "-xx", "-y", "-ttt", "-o", str(out),
            "-e", "trace=" + ",".join((*SYSCALLS, *META_SYSCALLS)),  # the tracer's, with these
            sys.executable, "-S", "-c", CHILD, str(d)]  # fmt: skip
    subprocess.run(argv, check=True, timeout=60)
    files = read_output(out)
    [pid] = [t for t in files if any(e.kind == "exec" for e in files[t])]
    trace = build_trace(files, pid, os.fsencode(os.getcwd()), None, None, 0.0, 100)
    f = os.fsencode(d / "f")
    got = [(m.call.what, m.path, m.call.detail, m.call.result) for m in trace.meta]
    assert got == [
        ("mode", f, "04755", "ok"),
        ("mode", f, "0700", "ok"),
        ("mode", f, "0644", "ok"),
        ("times", f, "", "ok"),
        ("mode", f, "0600", "ok"),
        ("owner", f, f"{os.getuid()}:{os.getgid()}", "ok"),
        ("times", f, "", "ok"),
        ("mode", os.fsencode(d / "missing"), "0777", "ENOENT"),
    ]
