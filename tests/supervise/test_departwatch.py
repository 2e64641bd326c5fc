"""`run --on-departure terminate` reads the family's execs from the log as they are written:
a departure is caught however many rotations fall between two of its reads."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from mcpshim.contract.lockfile import Boundary, Executable, Lock, ServerApproval, save_lock
from mcpshim.log import rotation
from tests.fixtures.home import Home, install
from tests.fixtures.runhelp import events, poll, run_argv, stopped


def _real(name: str) -> str:
    found = shutil.which(name)
    assert found is not None, name
    return os.path.realpath(found)


def test_a_departure_two_rotations_before_the_next_tick_still_ends_the_family(
    home: Home, tmp_path: Path
) -> None:
    """The supervisor is stopped (SIGSTOP) while the log rotates, the family runs a program
    the lock does not approve (its shim record goes into the new live log), and the log
    rotates again: when the supervisor goes on, that record is in a segment its watch never
    saw as the live log."""
    install(home, ["uname"])
    go, done = tmp_path / "go", tmp_path / "done"
    script = f"while [ ! -e {go} ]; do sleep 0.05; done; uname >/dev/null; : > {done}; sleep 60"
    approved = Boundary(executables=(Executable(_real("sh")), Executable(_real("sleep"))))
    lock = tmp_path / "mcpshim.lock"
    save_lock(Lock({"w": ServerApproval("w", startup=approved)}), lock)
    argv = run_argv(
        home,
        ["sh", "-c", script],
        "--name", "w", "--lock", str(lock), "--on-departure", "terminate",
        "--no-trace", "--grace", "1",
    )  # fmt: skip
    proc = subprocess.Popen(argv, env=home.env)
    try:
        [start] = poll(lambda: events(home, "session-start"), "session-start")
        with stopped(proc.pid, home.loc.lock_file):
            rotation.rotate(home.loc)  # the live log the watch holds is a segment now
            go.touch()
            poll(done.exists, "the family's uname")
            rotation.rotate(home.loc)  # and so is the one uname's record went into
        [dep] = poll(lambda: events(home, "departure"), "departure", deadline=30)
        assert proc.wait(timeout=60) != 0  # the family was ended, not the 60 s sleep
    finally:
        proc.kill()
        proc.wait()
    assert dep["what"] == "new executable" and dep["path"] == _real("uname")
    assert dep["source"] == "shim" and dep["session"] == start["session"]
    kinds = [e["kind"] for e in events(home, None, start["session"])]
    assert "terminated" in kinds[kinds.index("departure") :]
    [end] = events(home, "session-end", start["session"])
    assert end["survivors"] == 0


class _Sup:
    """What a DepartureWatch reads of and does to its supervisor, kept: it is the watch's
    decision on one sample that is tested here, not the supervisor's."""

    def __init__(self, home: Home) -> None:
        self.loc, self.session, self.boot_id = home.loc, "S", "B"
        self.child_pid, self.tracer, self.say = -1, None, None
        self.emitted: list[tuple[str, dict[str, Any]]] = []
        self.ended: list[str] = []

    def on_tick(self, fn: Any) -> None:
        pass

    def on_event(self, fn: Any) -> None:
        pass

    def emit(self, kind: str, payload: dict[str, Any]) -> None:
        self.emitted.append((kind, payload))

    def terminate_family(self, why: str) -> None:
        self.ended.append(why)


def _execd(pid: int, argv: list[str]) -> Any:
    from mcpshim.proc.procinfo import proc_info

    info = proc_info(pid)
    name = os.path.basename(info.exe) if info is not None else b""
    ok = info is not None and list(info.cmdline) == [a.encode() for a in argv]
    return info if ok and name == argv[0].encode() else None


def test_a_sample_of_the_shim_library_s_helper_is_no_departure(home: Home) -> None:
    """The sampler can catch the helper a shim runs to read its parent shell's argv (xargs,
    then sh): mcpshim's own work, never a new executable of the family (it ended a session
    under --on-departure terminate when the sampler caught it); any other program the lock
    does not list still is."""
    from mcpshim.log.shimhelper import HELPER_SCRIPT, HELPER_XARGS
    from mcpshim.proc.procinfo import proc_fields
    from mcpshim.supervise.departwatch import DepartureWatch

    install(home, ["uname"])
    sup = _Sup(home)
    watch = DepartureWatch(sup, ServerApproval("w"), "L")  # type: ignore[arg-type]
    helper = ["xargs", *HELPER_XARGS, "/bin/sh", "-p", "-c", HELPER_SCRIPT, "sh"]
    other = ["sleep", "30"]
    for argv in (helper, other):
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        try:
            # read once it has exec'd: a fork caught before (Python's image) is no sample
            # of the helper
            info = poll(lambda p=proc.pid, a=argv: _execd(p, a), "its exec")  # type: ignore[misc]
            watch.on_event("observed", proc_fields(info))
            watch.tick()
        finally:
            proc.kill()
            proc.wait()
        if argv is helper:
            assert not sup.emitted and not sup.ended and not watch.fired
    [(kind, dep)] = sup.emitted
    assert kind == "departure" and dep["what"] == "new executable"
    assert dep["path"] == _real("sleep") and sup.ended
