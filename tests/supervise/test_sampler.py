"""The sampler and the log tail, driven directly over real child processes of this test."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from mcpshim.log import execlog, rotation
from mcpshim.log.follow import Follower
from mcpshim.proc.procinfo import ProcInfo, Stat, proc_info, read_stat, socket_table
from mcpshim.supervise.sampler import Sampler, _has_image
from tests.fixtures.home import Home, install
from tests.fixtures.runhelp import events, only_session, poll, run


def test_log_tail_reads_only_new_whole_records_across_rotation(home: Home) -> None:
    install(home, ["git"])
    git = str(home.loc.shim_dir / "git")
    subprocess.run([git, "--version"], env=home.env, check=True, capture_output=True)
    tail = Follower.tail(home.loc)  # opened at the end: the record above is not "new"
    assert tail.poll() == []
    subprocess.run([git, "--version"], env=home.env, check=True, capture_output=True)
    [first] = tail.poll()
    assert isinstance(first, execlog.ExecRecord)
    assert first.args == (b"--version",)
    # Half a record: nothing yet; the rest: the record.
    rec = execlog.encode_record("exec", [b"x"] * 3)
    with home.loc.log_file.open("ab") as fh:
        fh.write(rec[:7])
        fh.flush()
        assert tail.poll() == []
        fh.write(rec[7:])
    assert tail.poll() == []  # whole but malformed (too short): reported, not returned
    assert tail.problems and "too short" in tail.problems[-1].message
    rotation.rotate(home.loc)
    subprocess.run([git, "version"], env=home.env, check=True, capture_output=True)
    [after] = tail.poll()
    assert isinstance(after, execlog.ExecRecord) and after.args == (b"version",)
    tail.close()


def test_sampler_observes_children_once_and_decides_a_tick_later() -> None:
    got: list[tuple[str, dict[str, Any]]] = []
    env = {**os.environ, "GH_TOKEN": "v", "AWS_CA_BUNDLE": "/etc/ssl/ca.pem", "PWD": "/"}
    child = subprocess.Popen(["sleep", "30"], env=env)
    try:
        s = Sampler("t", execlog.current_boot_id(), os.getpid(), lambda k, p: got.append((k, p)),
                    None)  # fmt: skip
        s.tick()
        assert [p["pid"] for k, p in got if k == "observed"] == []  # pending for one tick
        s.tick()
        s.tick()
        [obs] = [p for k, p in got if k == "observed" and p["pid"] == child.pid]
        assert obs["cmdline"] == ["sleep", "30"] and obs["ppid"] == os.getpid()
        assert "GH_TOKEN" in obs["credential_env"]
        # a path and the working directory are not credentials
        assert "AWS_CA_BUNDLE" not in obs["credential_env"] and "PWD" not in obs["credential_env"]
        assert obs["start"] == read_stat(child.pid).start  # type: ignore[union-attr]
        assert child.pid in s.survey()
    finally:
        child.kill()
        child.wait()


def test_exec_in_place_is_observed_again(home: Home) -> None:
    res = run(home, ["sh", "-c", "sleep 1; exec sleep 1.5"])
    assert res.returncode == 0
    [start] = events(home, "session-start")
    mine = [o["cmdline"] for o in events(home, "observed") if o["pid"] == start["child_pid"]]
    assert mine == [["sh", "-c", "sleep 1; exec sleep 1.5"], ["sleep", "1.5"]]


def test_descendant_credential_names_not_values(home: Home) -> None:
    # The value is assembled at run time, so it is in no command line either.
    res = run(home, ["sh", "-c", 'NPM_TOKEN="do-not-$(echo log-me)" sleep 1'])
    assert res.returncode == 0
    sid = only_session(home)
    [obs] = [o for o in events(home, "observed", sid) if o["cmdline"] == ["sleep", "1"]]
    assert "NPM_TOKEN" in obs["credential_env"]
    raw = b"".join(p.read_bytes() for p in home.loc.log_dir.glob("exec.log*"))
    assert b"do-not-log-me" not in raw


def test_proc_info_is_exact_bytes(tmp_path: Path) -> None:
    (tmp_path / "d\udcfe").mkdir()
    argv = [sys.executable, "-c", "import time; time.sleep(30)", "\udcff"]
    child = subprocess.Popen(argv, cwd=tmp_path / "d\udcfe")
    try:
        want = tuple(os.fsencode(a) for a in argv)

        def execd() -> ProcInfo | None:
            info = proc_info(child.pid)
            return info if info is not None and info.cmdline == want else None

        info = poll(execd, "the child to exec")
        assert info.cmdline[-1] == b"\xff"
        assert info.cwd == os.fsencode(tmp_path) + b"/d\xfe"
        assert info.uid == os.getuid()
    finally:
        child.kill()
        child.wait()


def test_socket_table_sees_a_listener() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        conns = socket_table().values()
        assert any(c.laddr == f"127.0.0.1:{port}" and c.status == "LISTEN" for c in conns)


def test_a_process_caught_inside_execve_has_no_image_yet() -> None:
    # The loader sets code, stack and argument addresses one after another; a tick that
    # reads in between must not take the half-set addresses for an image of their own.
    full = Stat(7, b"sleep", "S", 1, 7, 100, (b"4194304", b"4200000", b"14073", b"1407", b"1408"))
    assert _has_image(full)
    assert not _has_image(replace(full, image=(b"0", b"0", b"14073", b"0", b"0")))
    assert not _has_image(replace(full, state="Z"))
    assert not _has_image(replace(full, image=(b"0",) * 5))  # caught exiting


def test_a_new_process_caught_inside_execve_is_read_once_its_image_is_laid_out() -> None:
    """Inside execve the kernel shows the new program (exe) before its command line: a
    first sight there read the shim library's xargs helper as a program of its own, and a
    departure watch ended the session for it. Its details wait for the image."""
    got: list[tuple[str, dict[str, Any]]] = []
    child = subprocess.Popen(["sleep", "30"])
    try:
        s = Sampler("t", execlog.current_boot_id(), os.getpid(), lambda k, p: got.append((k, p)),
                    None)  # fmt: skip
        real = s.survey
        st = read_stat(child.pid)
        assert st is not None
        inside = replace(st, image=(b"0", b"0", b"14073", b"0", b"0"))  # as read mid-exec
        s.survey = lambda: {**real(), child.pid: inside}  # type: ignore[method-assign]
        s.tick()
        assert s.members[child.pid].info is None  # nothing read of a half-made image
        s.survey = real  # type: ignore[method-assign]
        s.tick()
        s.tick()
        [obs] = [p for k, p in got if k == "observed" and p["pid"] == child.pid]
        assert obs["cmdline"] == ["sleep", "30"] and obs["exe"].endswith("sleep")
    finally:
        child.kill()
        child.wait()
