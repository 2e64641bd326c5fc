"""A contained spawn with real processes: it behaves like the supervisor's posix_spawn (the
file actions, its own process group, default SIGPIPE, an exec error raised as OSError) and
the ruleset holds in the child and what it starts; write rules; which EACCES were the
ruleset's."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from mcpshim.contract.lockfile import Boundary, Executable, ServerApproval, ToolApproval
from mcpshim.sandbox.contained import Containment
from mcpshim.sandbox.plan import make_plan
from tests.fixtures.landlockhelp import needs_landlock

pytestmark = needs_landlock
SH = os.path.realpath("/bin/sh")
TRUE = os.path.realpath("/bin/true")
CAT = os.path.realpath("/bin/cat")


def _containment(tmp_path: Path, write: list[str] | None = None) -> Containment:
    progs = (SH, CAT, "/bin/mkdir", sys.executable)
    execs = tuple(Executable(os.path.realpath(p)) for p in progs)
    tool = ToolApproval("run", "sha", boundary=Boundary(execs))
    server = ServerApproval("srv", program=Executable(TRUE), tools={"run": tool})
    log = tmp_path / "log"
    log.mkdir(exist_ok=True)
    return Containment(make_plan(server, "L", 7, {}, None, "", write, str(log)), 7)


def _spawn(c: Containment, line: str) -> tuple[int, str, int]:
    """sh -c LINE, contained, its stdout through a dup2 file action: (status, out, pgid)."""
    r, w = os.pipe()
    pid = c.spawn(SH, ["sh", "-c", line], {"PATH": "/usr/bin:/bin"}, [(os.POSIX_SPAWN_DUP2, w, 1)])
    os.close(w)
    pgid = os.getpgid(pid)
    out = b""
    while chunk := os.read(r, 4096):
        out += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode(), pgid if pgid == pid else -1


def _rename(a: Path, b: Path) -> str:
    """rename(2) itself (mv would copy instead when the kernel says EXDEV)."""
    code = f"import os; os.rename({str(a)!r}, {str(b)!r}); print('renamed')"
    return f'{sys.executable} -c "{code}"'


def test_the_child_is_spawned_like_posix_spawn_and_held_by_the_ruleset(tmp_path: Path) -> None:
    copy = tmp_path / "true-copy"
    shutil.copy(TRUE, copy)
    line = (
        'while read -r k v; do [ "$k" = SigIgn: ] && echo "$k $v"; done < /proc/self/status; '
        f"{TRUE}; echo approved=$?; "
        f"{copy}; echo copy=$?; echo hi | {CAT}"
    )
    status, out, pgid = _spawn(_containment(tmp_path), line)
    assert status == 0 and pgid > 0  # its own process group
    assert "approved=0" in out and "copy=126" in out and "hi" in out  # 126: EACCES in sh
    ignored = int(out.split("SigIgn:")[1].split()[0], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1))  # Python ignores it; the server must not


def test_an_exec_that_fails_is_raised_as_posix_spawn_raises_it(tmp_path: Path) -> None:
    c = _containment(tmp_path)
    with pytest.raises(OSError) as exc:
        c.spawn(str(tmp_path / "missing"), ["missing"], {}, [])
    assert exc.value.errno == errno.ENOENT
    with pytest.raises(OSError) as denied:  # not approved: the kernel refuses it
        _containment(tmp_path).spawn("/bin/ls", ["ls"], {}, [])
    assert denied.value.errno == errno.EACCES


def test_writes_only_beneath_the_directories_given(tmp_path: Path) -> None:
    inside, outside = tmp_path / "work", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    line = (
        f"echo a > {inside}/f && echo inside=ok; echo b > {outside}/f || echo outside=refused; "
        f"echo c > /dev/null && echo null=ok; echo d > {tmp_path}/log/rec && echo log=ok; "
        f"mkdir {inside}/d && {_rename(inside / 'f', inside / 'd/f')} && echo mv=ok"
    )
    status, out, _ = _spawn(_containment(tmp_path, [str(inside)]), line)
    assert status == 0
    assert "inside=ok" in out and "outside=refused" in out and not (outside / "f").exists()
    assert "null=ok" in out and "log=ok" in out and "mv=ok" in out
    rename = _rename(outside / "f", outside / "d/f")
    line = f"echo b > {outside}/f && mkdir {outside}/d && {rename}"
    _, out, _ = _spawn(_containment(tmp_path), line)
    assert out == "renamed\n"  # no --contain-write: writes (renames too) are not restricted


def test_which_refusals_were_the_rulesets(tmp_path: Path) -> None:
    c = _containment(tmp_path)
    copy = tmp_path / "true-copy"
    shutil.copy(TRUE, copy)
    plain = tmp_path / "notes.txt"
    plain.write_text("x")
    script = tmp_path / "s.py"
    script.write_text("#!/usr/bin/python3\n")
    os.chmod(script, 0o755)
    assert c.exec_refused(str(copy).encode(), None, "EACCES") == (
        "not an executable the lock approved"
    )
    assert c.exec_refused(b"true-copy", str(tmp_path).encode(), "EACCES") is not None
    assert c.exec_refused(str(copy).encode(), None, "ENOENT") is None
    assert c.exec_refused(str(plain).encode(), None, "EACCES") is None  # no x bit: not ours
    assert c.exec_refused(TRUE.encode(), None, "EACCES") is None  # approved
    assert c.exec_refused(str(tmp_path / "gone").encode(), None, "EACCES") == (
        "not an executable the lock approved (it is gone now)"
    )
    assert c.connect_refused(443, "EACCES") is None  # connect is not restricted here
