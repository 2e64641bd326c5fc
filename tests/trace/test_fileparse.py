"""File calls as strace prints them (issue 40), from a real strace over a real process: an
open of each kind (read, write, append, create, under a directory fd, one that fails, a
directory), a rename, a link, a symlink and a truncate, each with the file it named and
reached and the result; and the file facts those make against the table of locations
(trace.filefacts): a credential file read, a place that runs later written, a file the
session wrote then ran, directly, as an interpreter's script and after a rename into
place, matched by path and, where the pump saw them, by inode."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcpshim.log.filetable import FileTable, Roots
from mcpshim.trace.filefacts import FileTracing, Inodes, file_records, script_operand
from mcpshim.trace.fileparse import FILE_SYSCALLS
from mcpshim.trace.metaparse import META_SYSCALLS
from mcpshim.trace.parse import LinePump, read_output
from mcpshim.trace.strace import SYSCALLS, Trace, build_trace
from tests.fixtures.runhelp import needs_trace

CHILD = r"""
import os, sys
d = sys.argv[1]
os.chdir(d)
open("r", "w").close()
open("r").read()                                   # read
open("w", "w").write("x")                          # write, create, truncate
open("w", "a").write("y")                          # append
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)     # a directory: no file read
os.close(os.open("r", os.O_RDONLY, dir_fd=dfd))    # under a directory fd
try:
    open("missing")
except OSError:
    pass
os.rename("w", "w2")
os.link("w2", "hard")
os.symlink("w2", "soft")
os.truncate("w2", 0)
"""


def _trace(tmp_path: Path, code: str, *args: str, feed: Inodes | None = None) -> Trace:
    strace = shutil.which("strace")
    assert strace is not None
    out = tmp_path / "trace"
    argv = [strace, "-f", "-qq", "-xx", "-y", "-ttt", "-o", str(out), "-e",
            "trace=" + ",".join((*SYSCALLS, *FILE_SYSCALLS, *META_SYSCALLS)),
            sys.executable, "-S", "-c", code, *args]  # fmt: skip
    subprocess.run(argv, check=True, timeout=60, cwd=tmp_path)
    if feed is not None:  # the pump's view, read while the files are still there
        feed.feed(LinePump().feed(out.read_bytes()))
    files = read_output(out)
    root = min(files)
    return build_trace(files, root, os.fsencode(tmp_path), None, None, 0.0, 100)


@needs_trace
def test_every_form_names_its_file(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    trace = _trace(tmp_path, CHILD, str(d))

    def p(name: str) -> bytes:
        return os.fsencode(d / name)

    here = [f for f in trace.files if f.path is not None and f.path.startswith(os.fsencode(d))]
    got = [(f.call.call, f.path, f.call.access, f.call.flags, f.target, f.call.result)
           for f in here]  # fmt: skip
    assert [g for g in got if g[0] != "openat" or g[1] != os.fsencode(d)] == [
        ("openat", p("r"), "write", ("create", "truncate"), None, "ok"),
        ("openat", p("r"), "read", (), None, "ok"),
        ("openat", p("w"), "write", ("create", "truncate"), None, "ok"),
        ("openat", p("w"), "write", ("create", "append"), None, "ok"),
        ("openat", p("r"), "read", (), None, "ok"),
        ("openat", p("missing"), "read", (), None, "ENOENT"),
        ("rename", p("w"), "", (), p("w2"), "ok"),
        ("link", p("w2"), "", (), p("hard"), "ok"),
        ("symlink", p("soft"), "", (), p("soft"), "ok"),
        ("truncate", p("w2"), "", (), None, "ok"),
    ]
    [listed] = [f for f in trace.files if f.path == os.fsencode(d)]
    assert "directory" in listed.call.flags
    [reached] = [f for f in trace.files if f.call.result == "ok" and f.path == p("r")][-1:]
    assert reached.call.opened == p("r")  # -y: the file the descriptor names


def _records(trace: Trace, table: FileTable, inodes: Inodes | None = None) -> list[dict[str, Any]]:
    def head(t: float, pid: int, tid: int) -> dict[str, Any]:
        return {"session": "s", "time": str(t), "boot_id": "b", "pid": pid}

    tracing = FileTracing(table, None, inodes or Inodes())
    return list(file_records(trace, head, tracing, {}))


WRITES_AND_RUNS = r"""
import os, subprocess, sys
home, ws = sys.argv[1], sys.argv[2]
os.chdir(ws)
open(os.path.join(home, ".ssh", "id_ed25519")).read()
open(os.path.join(home, ".ssh", "id_ed25519.pub")).read()      # not a credential
open(os.path.join(home, ".bashrc"), "a").write("x\n")
open("build.sh", "w").write("#!/bin/sh\necho built\n")
subprocess.run(["sh", "build.sh"], check=True)
open("tool.tmp", "w").write("#!/bin/sh\necho tool\n")
os.chmod("tool.tmp", 0o755)
os.rename("tool.tmp", "tool")
subprocess.run(["./tool"], check=True)
subprocess.run(["sh", "-c", "echo not a script"], check=True)
"""


@needs_trace
def test_a_read_a_write_and_files_written_then_run(tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    (home / ".ssh").mkdir(parents=True)
    ws.mkdir()
    (home / ".ssh" / "id_ed25519").write_text("key\n")
    (home / ".ssh" / "id_ed25519.pub").write_text("pub\n")
    inodes = Inodes()
    trace = _trace(tmp_path, WRITES_AND_RUNS, str(home), str(ws), feed=inodes)
    table = FileTable(Roots((str(home),), str(ws)))
    recs = _records(trace, table, inodes)
    creds = [r for r in recs if "credential" in r]
    assert [(r["path"], r["credential"], r["access"], r["result"], r.get("private_key"))
            for r in creds] == [
        (str(home / ".ssh" / "id_ed25519"), "SSH private key", "read", "ok", True)
    ]  # fmt: skip
    [persist] = [r for r in recs if "persistence" in r]
    assert (persist["path"], persist["change"], persist["persistence"]) == (
        str(home / ".bashrc"), "append", "shell start-up file",
    )  # fmt: skip
    ran = [r for r in recs if r["change"] == "run"]
    assert [(r["path"], r.get("interpreter"), r["written"].get("path")) for r in ran] == [
        (str(ws / "build.sh"), "sh", None),
        (str(ws / "tool"), None, str(ws / "tool.tmp")),  # renamed into place
    ]
    pid = min(trace.processes)
    assert all(r["written"]["pid"] == pid for r in ran)
    # the pump saw the written files while they were there: the inode of what ran is known
    assert all(":" in r.get("inode", "") for r in ran if r.get("interpreter") is None)


REPLACED = r"""
import os, subprocess, sys, time
os.chdir(sys.argv[1])
open("job.sh", "w").write("#!/bin/sh\necho mine\n")
os.chmod("job.sh", 0o755)
while not os.path.exists("go"):
    time.sleep(0.01)
subprocess.run(["./job.sh"], check=True)
"""


@needs_trace
def test_a_file_replaced_from_outside_the_session_is_not_what_it_wrote(tmp_path: Path) -> None:
    """The session writes job.sh; someone outside it puts another file there (another
    inode); the session runs job.sh: not a file the session wrote. The pump reads the
    trace as it grows, as it does live."""
    strace = shutil.which("strace")
    assert strace is not None
    ws, out = tmp_path / "ws", tmp_path / "trace"
    ws.mkdir()
    argv = [strace, "-f", "-qq", "-xx", "-y", "-ttt", "-o", str(out), "-e",
            "trace=" + ",".join((*SYSCALLS, *FILE_SYSCALLS)),
            sys.executable, "-S", "-c", REPLACED, str(ws)]  # fmt: skip
    inodes, pump = Inodes(), LinePump()
    with subprocess.Popen(argv) as proc:
        deadline = 600
        while not (ws / "job.sh").exists() or os.stat(ws / "job.sh").st_mode & 0o100 == 0:
            deadline -= 1
            assert deadline > 0 and proc.poll() is None
            subprocess.run(["sleep", "0.05"], check=True)
        first = out.read_bytes()
        inodes.feed(pump.feed(first))  # the write, seen while the file is there
        other = tmp_path / "other.sh"
        other.write_text("#!/bin/sh\necho theirs\n")
        other.chmod(0o755)
        os.replace(other, ws / "job.sh")
        (ws / "go").touch()
        assert proc.wait(timeout=60) == 0
    inodes.feed(pump.feed(out.read_bytes()[len(first) :]))  # the exec, and the new file there
    files = read_output(out)
    trace = build_trace(files, min(files), os.fsencode(tmp_path), None, None, 0.0, 100)
    table = FileTable(Roots((str(tmp_path / "nohome"),), str(ws)))
    assert [r for r in _records(trace, table, inodes) if r["change"] == "run"] == []
    # the same trace without the inodes: by path alone, it is the file the session wrote
    [by_path] = [r for r in _records(trace, table) if r["change"] == "run"]
    assert by_path["path"] == str(ws / "job.sh")


def test_an_interpreters_script_is_its_first_operand() -> None:
    cwd = b"/w"
    assert script_operand(b"/usr/bin/python3", [b"python3", b"-u", b"x.py"], cwd) == b"/w/x.py"
    assert script_operand(b"/bin/bash", [b"bash", b"--", b"/t/y.sh"], cwd) == b"/t/y.sh"
    assert script_operand(b"/bin/sh", [b"sh", b"-c", b"./x.sh"], cwd) is None  # a line
    assert script_operand(b"/usr/bin/python3", [b"python3", b"-m", b"pkg"], cwd) is None
    assert script_operand(b"/usr/bin/git", [b"git", b"status"], cwd) is None  # no interpreter


@needs_trace
def test_a_file_facts_path_is_redacted_as_argv_is(tmp_path: Path) -> None:
    # a file named after a token: its record keeps the rule's name, never the token
    home, ws = tmp_path / "home", tmp_path / "ws"
    (home / ".ssh").mkdir(parents=True)
    ws.mkdir()
    token = "ghp_" + "A1b2C3d4E5" * 4
    key = home / ".ssh" / f"id_{token}"
    key.write_text("key\n")
    trace = _trace(tmp_path, f"open({str(key)!r}).read()")
    [rec] = [r for r in _records(trace, FileTable(Roots((str(home),), str(ws)))) if
             "credential" in r]  # fmt: skip
    assert token not in repr(rec) and rec["path_redacted"] == ["github-token"]
    assert rec["path"].startswith(f"{home}/.ssh/id_") and rec["credential"] == "SSH private key"
