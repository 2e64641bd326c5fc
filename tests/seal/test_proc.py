"""The sealer's key cannot be read by another process of the same user: the sealer is
non-dumpable, so /proc/PID/mem is refused. The same attack on a process that holds the
same key without that protection succeeds, so the test can fail.

Tests run as root, and root reads any process's memory (CAP_SYS_PTRACE): the target and
the attacker are both forked from this process and dropped to one unprivileged uid. The
attacker starts the target itself, so a Yama ptrace_scope of 1 (descendants only) cannot
be what refuses it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mcpshim.log import eventlog
from mcpshim.paths import Locations
from mcpshim.seal import follow, keys
from mcpshim.seal import state as seal_state
from mcpshim.seal.state import AnchorConfig
from mcpshim.seal.verify import verify

NOBODY = 65534

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0,
    reason="needs Linux and root (to drop two processes to one unprivileged uid)",
)


def _set_dumpable(value: int) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    assert libc.prctl(4, value, 0, 0, 0) == 0  # PR_SET_DUMPABLE


def _as_nobody(work: Callable[[], object]) -> int:
    """Run `work` in a forked child with uid/gid 65534; its exit status. setuid() leaves a
    process non-dumpable (fs.suid_dumpable); an ordinary process of that user, started by
    exec, is dumpable: so is this one, until the sealer makes itself not."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            _set_dumpable(1)
            work()
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.fixture
def base() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="mcpshim-mem-"))
    os.chown(d, NOBODY, NOBODY)
    yield d
    import shutil

    shutil.rmtree(d, ignore_errors=True)


def _regions(pid: int) -> list[tuple[int, int]]:
    out = []
    with open(f"/proc/{pid}/maps") as fh:
        for line in fh:
            span, perms = line.split()[:2]
            if perms.startswith("rw"):
                a, b = (int(x, 16) for x in span.split("-"))
                out.append((a, b))
    return out


def _attack(
    target: Callable[[], object],
    ready: Callable[[], bool],
    state_path: Path,
    wanted: Callable[[], list[bytes]],
) -> dict[str, object]:
    """As the attacker (uid 65534): start the target, wait until it holds a key, then look
    for any of the `wanted` keys in its memory (worked out only after the target was
    forked, so that its memory holds no copy of ours)."""
    r, w = os.pipe()

    def attacker() -> None:
        os.close(r)
        tpid = os.fork()
        if tpid == 0:
            code = 1
            try:
                target()
                code = 0
            except BaseException as exc:  # the status says it failed, the file why
                (state_path.parent / "target-error").write_text(repr(exc))
            finally:
                os._exit(code)
        result: dict[str, object] = {"opened": False, "found": False, "error": ""}
        try:
            deadline = time.monotonic() + 60
            while not ready() and time.monotonic() < deadline:
                time.sleep(0.05)
            keys_wanted = wanted()
            try:
                fd = os.open(f"/proc/{tpid}/mem", os.O_RDONLY)
            except OSError as exc:
                result["error"] = exc.strerror or str(exc)
            else:
                result["opened"] = True
                try:
                    for a, b in _regions(tpid):
                        try:
                            chunk = os.pread(fd, b - a, a)
                        except OSError:
                            continue
                        if any(k in chunk for k in keys_wanted):
                            result["found"] = True
                            break
                finally:
                    os.close(fd)
        finally:
            os.kill(tpid, signal.SIGTERM)
            result["target_status"] = os.waitstatus_to_exitcode(os.waitpid(tpid, 0)[1])
            err = state_path.parent / "target-error"
            result["target_error"] = err.read_text() if err.exists() else ""
            os.write(w, json.dumps(result).encode())

    code = _as_nobody(attacker)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = fh.read()
    assert code == 0, data
    doc = json.loads(data)
    assert isinstance(doc, dict)
    return doc


def test_a_same_user_process_cannot_read_the_sealers_key(base: Path) -> None:
    loc = Locations(base / "shims", base / "log")
    state_path = base / "state" / "seal.json"
    say: list[str] = []
    verifier_file = base / "verifier"  # the test keeps it to know what to look for

    def init() -> None:
        text, _ = follow.init(loc, state_path, AnchorConfig(mode="none"), False, say.append, 1)
        verifier_file.write_text(text)

    assert _as_nobody(init) == 0

    def from_state() -> list[bytes]:
        """The key the state file holds, and those it leads to."""
        st = seal_state.load(state_path)
        assert st is not None
        u = [bytes.fromhex(st.session_key)]
        for _ in range(50):
            u.append(keys.next_session(u[-1]))
        return [*u, bytes.fromhex(st.epoch_key)]

    def from_verifier() -> list[bytes]:
        """Every key up to now: the sealer's is among them (not derivable from the state)."""
        v = keys.Verifier.parse(verifier_file.read_text())
        walker = keys.KeyWalker(v)
        now = v.epoch(time.time())
        return [k for e in range(now + 2) for s in range(20) if (k := walker.key(e, s))]

    lock = seal_state.SealerLock(state_path).path
    marker = base / "control-ready"

    def control() -> None:
        """What the sealer holds, in a process that did not make itself non-dumpable."""
        st = seal_state.load(state_path)
        assert st is not None
        u, k = bytearray.fromhex(st.session_key), bytearray.fromhex(st.epoch_key)
        held = keys.SealKeys(st.epoch, st.session, u, k)
        marker.write_text("ready")
        time.sleep(60)
        held.erase()

    found = _attack(control, marker.exists, state_path, from_state)
    assert found["opened"] and found["found"], found  # the attack works on a dumpable process

    def locked() -> bool:
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True  # the follower holds it: it has its key
        finally:
            os.close(fd)
        return False

    def sealer() -> None:
        eventlog.append_event(loc, "note", {"time": "now", "what": "to be sealed"})
        follow.follow(loc, state_path, say.append, eof=False, interval=0.2)

    refused = _attack(sealer, locked, state_path, from_verifier)
    assert not refused["opened"] and refused["error"] == "Permission denied", refused
    assert refused["target_status"] == 0, refused[
        "target_error"
    ]  # it sealed once more and left at SIGTERM
    st = seal_state.load(state_path)
    assert st is not None and st.n >= 1  # the follower sealed: it was the real sealer
    assert verify(loc, (), None, st).verdict == "verified"
