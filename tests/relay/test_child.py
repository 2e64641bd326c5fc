"""`mcpshim run --mcp` pumps bytes from a forked child (relaychild): transparent both ways,
deaf to signals, holding only its streams, passing on a peer that goes away, bounded in
what waits for the recorder, and never a member of the family the session records."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tty
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from mcpshim.base import fdio
from mcpshim.log import eventlog
from mcpshim.proc.procinfo import read_stat
from mcpshim.relay.channel import EOF, LOST, MORE
from mcpshim.relay.child import available
from mcpshim.relay.core import C2S, COPY_LIMIT, S2C, Recorder, relay_pipe
from mcpshim.relay.forked import LOSS_PART, ForkedRelay, InOrder
from tests.fixtures import byte_server
from tests.fixtures.home import FIXTURES, Home
from tests.fixtures.runhelp import events, poll, run_argv

pytestmark = pytest.mark.skipif(not available(), reason="the forked relay is Linux-only")

FIX = FIXTURES
FAMILY_KINDS = ("observed", "survivor", "reaped")


def _children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        st = read_stat(int(name)) if name.isdigit() else None
        if st is not None and st.ppid == pid and st.state != "Z":
            out.append(st.pid)
    return out


def _relay_child(supervisor: int, comm: bytes = b"mcpshim-relay") -> int:
    """The supervisor's child named `comm` (the pump child by default), once it is there."""

    def find() -> int | None:
        for pid in _children(supervisor):
            st = read_stat(pid)
            if st is not None and st.comm == comm:
                return pid
        return None

    return poll(find, comm.decode())


def _fd(pid: int | str, fd: int) -> str:
    return os.readlink(f"/proc/{pid}/fd/{fd}")


def _family_records(home: Home, pid: int) -> list[dict[str, Any]]:
    return [e for k in FAMILY_KINDS for e in events(home, k) if e["pid"] == pid]


def test_byte_transparency_through_the_relay_child(home: Home, tmp_path: Path) -> None:
    sent_c, sent_s = byte_server.client_stream(), byte_server.server_stream()
    out = tmp_path / "server-got.txt"
    argv = run_argv(home, [sys.executable, str(FIX / "byte_server.py"), str(out)], "--mcp")
    proc = subprocess.Popen(
        argv, env=home.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin and proc.stdout
    relay = _relay_child(proc.pid)
    # Only the child holds the client's streams; it holds nothing else but stderr and its
    # pipes: to the server both ways, a probe per direction (both ends), the five of the
    # copy channel (heads, the bytes of each direction, the overflow, the bell), the
    # control pipe and the status pipe. Both sources are pipes, teed from where they are:
    # no pipe of its own in between.
    assert _fd(relay, 0) == _fd("self", proc.stdin.fileno())
    assert _fd(relay, 1) == _fd("self", proc.stdout.fileno())
    # The supervisor lets go of them just after the fork, maybe after the child is set up.
    poll(lambda: _fd(proc.pid, 0) == _fd(proc.pid, 1) == os.devnull, "the supervisor's 0 and 1")
    fds = sorted(int(n) for n in os.listdir(f"/proc/{relay}/fd"))
    assert len(fds) == 16 and fds[:3] == [0, 1, 2], fds
    assert all(_fd(relay, fd).startswith("pipe:") for fd in fds[3:])
    # The supervisor alone decides its lifetime.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        os.kill(relay, sig)
    got, err = proc.communicate(sent_c, timeout=120)
    assert proc.returncode == 0, err
    # Both directions, a 1 MiB message each way among them: exactly what the other sent.
    assert len(sent_c) > 1 << 20 and len(sent_s) > 1 << 20
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(sent_s).hexdigest()
    assert out.read_text() == f"{hashlib.sha256(sent_c).hexdigest()} {len(sent_c)}\n"
    [start] = events(home, "session-start")
    sid = start["session"]
    assert start["pid"] == proc.pid
    # The records are those of the in-process relay.
    reqs = events(home, "mcp-request", sid)
    assert [r["id"] for r in reqs] == [2, 3, 4, 5]
    assert reqs[0]["arguments"]["text"].endswith("more characters not recorded]")
    assert reqs[1]["arguments"] == {"api_key": "[REDACTED:credential-name]"}
    resps = {r["id"]: r for r in events(home, "mcp-response", sid)}
    assert resps[2]["is_error"] is False and resps[2]["size"] > 1 << 20
    assert resps[4]["is_error"] is True and resps[4]["error_code"] == -32601
    assert all(resps[i]["time"] >= r["time"] for i, r in zip((2, 3, 4), reqs, strict=False))
    reasons = [(u["direction"], u["reason"]) for u in events(home, "mcp-unparsed", sid)]
    assert (C2S, "not UTF-8 text") in reasons
    assert (S2C, "incomplete message at end") in reasons
    # The relay child is mcpshim's, not the server's: no family record, no survivor, and
    # never among a response's live processes.
    assert _family_records(home, relay) == []
    assert all(relay not in [p for p, _ in r["alive"]] for r in resps.values())
    [end] = events(home, "session-end", sid)
    assert end["survivors"] == 0
    assert not os.path.exists(f"/proc/{relay}")  # reaped


WRITE_8_MIB = """
import os, sys
view = memoryview(b"z" * (8 << 20))
try:
    while view:
        view = view[os.write(1, view):]
except BrokenPipeError:
    open(sys.argv[1], "w").write("EPIPE")
    sys.exit(3)
open(sys.argv[1], "w").write("written")
"""

CLOSE_STDIN = """
import os, sys, time
os.close(0)
open(sys.argv[1], "w").write("closed")
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
"""


def test_a_client_that_stops_reading_is_passed_on_to_the_server(home: Home, tmp_path: Path) -> None:
    # As with no relay between them: the server's writes fail (EPIPE; SIGPIPE where it is
    # not ignored) once its reader is gone. Drained instead, a server that kept writing
    # grew the pump child's backlog without bound (1.5 GB in 4 s).
    got = tmp_path / "got"
    argv = run_argv(home, [sys.executable, "-c", WRITE_8_MIB, str(got)], "--mcp")
    proc = subprocess.Popen(argv, env=home.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    relay = _relay_child(proc.pid)
    proc.stdout.close()  # the client is gone as a reader
    assert proc.wait(timeout=120) == 3  # 8 MiB is far more than the pipes hold
    assert got.read_text() == "EPIPE"
    proc.stdin.close()
    [end] = events(home, "session-end")
    assert end["survivors"] == 0 and end["exit_status"] == 3
    assert _family_records(home, relay) == []


def test_a_server_that_writes_forever_ends_when_its_client_closes(home: Home) -> None:
    # The case: a server that never stops writing (yes, SIGPIPE at its default)
    # and a client that closes its end. The session ends as it would directly: 128 + 13.
    line = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    argv = run_argv(home, ["yes", line], "--mcp")
    proc = subprocess.Popen(argv, env=home.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    assert len(proc.stdout.read(1 << 20)) == 1 << 20
    relay = _relay_child(proc.pid)
    proc.stdout.close()
    try:
        assert proc.wait(timeout=60) == 128 + signal.SIGPIPE
    finally:
        proc.kill()
    assert not os.path.exists(f"/proc/{relay}")  # reaped
    proc.stdin.close()


def test_a_server_that_stops_reading_is_passed_on_to_the_client(home: Home, tmp_path: Path) -> None:
    # The server closes its stdin: the client's next writes fail, as they would directly.
    closed, release = tmp_path / "closed", tmp_path / "release"
    argv = run_argv(home, [sys.executable, "-c", CLOSE_STDIN, str(closed), str(release)], "--mcp")
    proc = subprocess.Popen(argv, env=home.env, stdin=subprocess.PIPE)
    assert proc.stdin
    poll(closed.exists, "the server to close its stdin")
    failed: list[BaseException] = []
    stdin = proc.stdin

    def write() -> None:
        try:
            for _ in range(64):  # far more than the pipes hold
                stdin.write(b"y" * (1 << 20) + b"\n")
                stdin.flush()
        except BrokenPipeError as exc:
            failed.append(exc)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        writer.join(60)
        assert not writer.is_alive(), "the client's writes blocked"
        assert failed, "the client's writes all went through to a server that closed its stdin"
    finally:
        release.write_text("go")
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    assert proc.wait(timeout=120) == 0


# ---- what the client's fds may be, and a supervisor that falls behind --------------------


def _run_byte_server(
    home: Home, tmp_path: Path, stdin: Any, stdout: Any
) -> subprocess.Popen[bytes]:
    out = tmp_path / "server-got.txt"
    argv = run_argv(home, [sys.executable, str(FIX / "byte_server.py"), str(out)], "--mcp")
    return subprocess.Popen(argv, env=home.env, stdin=stdin, stdout=stdout)


def _server_got(tmp_path: Path) -> str:
    return (tmp_path / "server-got.txt").read_text()


def _digest(data: bytes) -> str:
    return f"{hashlib.sha256(data).hexdigest()} {len(data)}\n"


def _talk(send: Callable[[], None], read: Callable[[], bytes]) -> bytes:
    """`send` on a thread while this one reads to EOF, so neither side blocks the other."""
    writer = threading.Thread(target=send, daemon=True)
    writer.start()
    got = bytearray()
    while chunk := read():
        got += chunk
    writer.join(60)
    return bytes(got)


def test_socket_peers_as_node_clients_give_them(home: Home, tmp_path: Path) -> None:
    # Node's child_process hands a server socketpairs, not pipes: splice takes those too.
    sent_c, sent_s = byte_server.client_stream(), byte_server.server_stream()
    ours, theirs = socket.socketpair()
    with ours, theirs:
        proc = _run_byte_server(home, tmp_path, theirs.fileno(), theirs.fileno())
        theirs.close()

        def send() -> None:
            ours.sendall(sent_c)
            ours.shutdown(socket.SHUT_WR)

        got = _talk(send, lambda: ours.recv(1 << 20))
    assert proc.wait(timeout=120) == 0
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(sent_s).hexdigest()
    assert _server_got(tmp_path) == _digest(sent_c)
    assert [r["id"] for r in events(home, "mcp-request")] == [2, 3, 4, 5]


def test_files_and_an_append_mode_stdout(home: Home, tmp_path: Path) -> None:
    # A regular file as stdin, and a stdout opened for appending: splice refuses O_APPEND
    # (EINVAL), so that direction is written instead, the bytes unchanged.
    sent_c, sent_s = byte_server.client_stream(), byte_server.server_stream()
    src, dst = tmp_path / "client.bin", tmp_path / "out.bin"
    src.write_bytes(sent_c)
    dst.write_bytes(b"before\n")
    with src.open("rb") as stdin, dst.open("ab") as stdout:
        proc = _run_byte_server(home, tmp_path, stdin, stdout)
    assert proc.wait(timeout=120) == 0
    assert dst.read_bytes() == b"before\n" + sent_s
    assert _server_got(tmp_path) == _digest(sent_c)
    assert len(events(home, "mcp-response")) == 3


def test_peers_a_client_made_non_blocking(home: Home, tmp_path: Path) -> None:
    # O_NONBLOCK belongs to the open file, which the client shares with the relay: a read
    # or splice that would block must wait, not be taken for the end of the stream.
    sent_c, sent_s = byte_server.client_stream(), byte_server.server_stream()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.set_blocking(in_r, False)
    os.set_blocking(out_w, False)
    proc = _run_byte_server(home, tmp_path, in_r, out_w)
    os.close(in_r)
    os.close(out_w)

    def send() -> None:
        with open(in_w, "wb") as f:
            for i in range(0, len(sent_c), 4096):  # in pieces, so the relay finds it empty
                f.write(sent_c[i : i + 4096])
                f.flush()
                time.sleep(0.0005)

    with open(out_r, "rb", buffering=0) as out:
        got = _talk(send, lambda: out.read(1 << 20))
    assert proc.wait(timeout=120) == 0
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(sent_s).hexdigest()
    assert _server_got(tmp_path) == _digest(sent_c)


def test_a_terminal_as_stdout(home: Home, tmp_path: Path) -> None:
    sent_c, sent_s = byte_server.client_stream(), byte_server.server_stream()
    master, slave = os.openpty()
    tty.setraw(slave)  # no newline translation: the bytes must arrive as sent
    got = bytearray()

    def read() -> None:
        while len(got) < len(sent_s):
            try:
                got.extend(os.read(master, 1 << 20))
            except OSError:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc = _run_byte_server(home, tmp_path, subprocess.PIPE, slave)
    os.close(slave)
    assert proc.stdin
    proc.stdin.write(sent_c)
    proc.stdin.close()
    assert proc.wait(timeout=120) == 0
    reader.join(60)
    os.close(master)
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(sent_s).hexdigest()
    assert _server_got(tmp_path) == _digest(sent_c)


def _request(i: int, size: int) -> bytes:
    body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "t" * size}}
    return json.dumps(body).encode() + b"\n"


def _to_cat(relay: ForkedRelay) -> tuple[int, int, subprocess.Popen[bytes]]:
    """Start `relay` between a client's pipes and `cat`: the client's write end, its read
    end, and cat."""
    c_in_r, c_in_w = os.pipe()
    c_out_r, c_out_w = os.pipe()
    in_r, in_w = relay_pipe()
    out_r, out_w = relay_pipe()
    cat = subprocess.Popen(["cat"], stdin=in_r, stdout=out_w)
    os.close(in_r)
    os.close(out_w)
    relay.start(c_in_r, in_w, out_r, c_out_w)
    return c_in_w, c_out_r, cat


def _through(relay: ForkedRelay, stream: list[bytes], before: Callable[[], None]) -> bytes:
    """Relay `stream` from a client to `cat` and back, `before` called once the relay
    runs; what the client got."""
    c_in_w, c_out_r, cat = _to_cat(relay)
    before()

    def write() -> None:
        for msg in stream:
            fdio.write_all(c_in_w, msg)  # one write() each for the small ones
        os.close(c_in_w)

    with open(c_out_r, "rb", buffering=0) as out:
        got = _talk(write, lambda: out.read(1 << 20))
    assert cat.wait(timeout=60) == 0
    return got


def _logged_relay(home: Home, limit: int = COPY_LIMIT) -> ForkedRelay:
    def emit(kind: str, payload: dict[str, Any]) -> None:
        eventlog.append_event(home.loc, kind, payload)

    return ForkedRelay(Recorder(emit, "s"), limit)


def test_copies_wait_in_a_backlog_never_the_relay(home: Home) -> None:
    # Tiny writes, then four times what a copy pipe holds, while the recorder is stopped:
    # everything crosses (each direction's pipe fills, then the overflow pipe, then the
    # pump child's backlog takes the rest), and once the recorder runs again every message
    # is recorded, in order, both ways.
    sizes = [5] * 3000 + [1 << 20] * 4 + [200 << 10] * 5
    stream = [_request(i, size) for i, size in enumerate(sizes)]
    relay = _logged_relay(home)
    got = _through(relay, stream, lambda: os.kill(relay.recorder_pid, signal.SIGSTOP))
    assert got == b"".join(stream)  # through, with nobody reading a copy
    assert relay.server_done(60)
    os.kill(relay.recorder_pid, signal.SIGCONT)
    relay.finish(60)
    assert relay.reap() == 0
    seen = events(home, "mcp-request", "s")
    ids = list(range(len(sizes)))
    for direction in (C2S, S2C):
        got_here = [e for e in seen if e["direction"] == direction]
        assert [e["id"] for e in got_here] == ids
        assert [e["size"] for e in got_here] == [len(m) - 1 for m in stream]


def test_what_waits_for_a_stopped_recorder_is_bounded_and_the_loss_recorded(
    home: Home,
) -> None:
    # 64 MiB each way while the recorder is stopped, with a 4 MiB limit: every byte
    # crosses, the pump child's memory stays near the limit (it held both directions'
    # 128 MiB before), the copies past it are dropped, and the loss is on record where it
    # happened; once the recorder runs again, so does recording.
    limit = 4 << 20
    relay = _logged_relay(home, limit)
    c_in_w, c_out_r, cat = _to_cat(relay)
    os.kill(relay.recorder_pid, signal.SIGSTOP)
    pump = psutil.Process(relay.pid)
    base = pump.memory_info().rss
    first = [_request(i, 256 << 10) for i in range(256)]
    stream = b"".join(first)
    peak = [base]
    writer = threading.Thread(target=fdio.write_all, args=(c_in_w, stream), daemon=True)
    writer.start()
    with open(c_out_r, "rb", buffering=0, closefd=False) as out:
        got = bytearray()
        while len(got) < len(stream):
            got += out.read(1 << 20)
            peak[0] = max(peak[0], pump.memory_info().rss)
    writer.join(60)
    assert got == stream
    assert peak[0] - base < 32 << 20, (base, peak)
    os.kill(relay.recorder_pid, signal.SIGCONT)
    log = home.loc.log_file
    poll(lambda: log.exists() and len(events(home, "mcp-unrecorded")) == 2, "the loss")
    late = [_request(1000 + i, 10) for i in range(3)]
    for msg in late:
        fdio.write_all(c_in_w, msg)
        assert fdio.read_exactly(c_out_r, len(msg)) == msg
    os.close(c_in_w)
    assert fdio.read_some(c_out_r, 10) == b""
    os.close(c_out_r)
    assert cat.wait(timeout=60) == 0
    assert relay.server_done(60)
    relay.finish(60)
    assert relay.reap() == 0
    for direction in (C2S, S2C):
        mine = [e for e in events(home, None, "s") if e.get("direction") == direction]
        ids = [e["id"] for e in mine if e["kind"] == "mcp-request"]
        kept = [i for i in ids if i < 1000]
        assert kept == list(range(len(kept))) and len(kept) < 256 // 2
        assert ids[len(kept) :] == [1000, 1001, 1002]
        [lost] = [e for e in mine if e["kind"] == "mcp-unrecorded"]
        assert mine.index(lost) == len(kept)  # where it happened
        assert len(kept) + lost["messages"] == 256
        assert 0 < lost["bytes"] <= len(stream) - sum(map(len, first[: len(kept)]))
        assert "reached 4 MiB" in lost["reason"]


def test_pipes_grow_only_in_a_session_with_large_messages(home: Home) -> None:
    # Every pipe page counts against the user's allowance: small messages keep the default
    # 64 KiB pipes; the first large one makes the pipes to both peers 512 KiB (the
    # client's among them), so the next crosses in one turn.
    relay = _logged_relay(home)
    c_in_w, c_out_r, cat = _to_cat(relay)

    def size(fd: int) -> int:
        return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))

    for i in range(50):
        fdio.write_all(c_in_w, _request(i, 5))
        assert fdio.read_exactly(c_out_r, len(_request(i, 5))) == _request(i, 5)
    assert size(c_in_w) == size(c_out_r) == 64 << 10
    big = _request(50, 1 << 20)
    writer = threading.Thread(target=fdio.write_all, args=(c_in_w, big), daemon=True)
    writer.start()
    assert fdio.read_exactly(c_out_r, len(big)) == big
    writer.join(60)
    assert size(c_in_w) == size(c_out_r) == 512 << 10
    os.close(c_in_w)
    assert fdio.read_some(c_out_r, 10) == b""
    assert cat.wait(timeout=60) == 0
    assert relay.server_done(60)
    relay.finish(60)
    assert relay.reap() == 0
    assert [e["id"] for e in events(home, "mcp-request", "s") if e["direction"] == C2S] == list(
        range(51)
    )


def test_a_recorder_that_died_costs_the_copies_only(home: Home) -> None:
    stream = [_request(i, size) for i, size in enumerate([10, 3 << 20, 10])]
    relay = _logged_relay(home)

    def kill() -> None:
        os.kill(relay.recorder_pid, signal.SIGKILL)
        os.waitpid(relay.recorder_pid, 0)

    assert _through(relay, stream, kill) == b"".join(stream)
    relay.finish(10)
    assert relay.reap() == 0
    # Nothing half-written: the supervisor's side records what never reached a recorder.
    lost = events(home, None, "s")
    assert [(e["kind"], e["direction"]) for e in lost] == [
        ("mcp-unrecorded", C2S),
        ("mcp-unrecorded", S2C),
    ]
    for e in lost:
        assert e["bytes"] == len(b"".join(stream)) and e["messages"] == 3
        assert "recorder stopped or was stuck" in e["reason"]


def test_copies_a_stuck_recorder_never_took_are_on_record(home: Home) -> None:
    # The recorder stops for good: the pump child gives its copies up once it has made no
    # progress (took nothing, used no CPU) for a while, and the supervisor's side records
    # what was given up. Before, those copies vanished without a word.
    stream = [_request(i, size) for i, size in enumerate([10, 3 << 20, 10])]
    relay = _logged_relay(home)
    try:
        got = _through(relay, stream, lambda: os.kill(relay.recorder_pid, signal.SIGSTOP))
        assert got == b"".join(stream)
        assert relay.server_done(60)
        relay.finish(1.0)  # the recorder does nothing: ended (and reaped) after a second
        assert relay.reap() == 0
        with pytest.raises(ChildProcessError):
            os.waitpid(relay.recorder_pid, os.WNOHANG)
    finally:
        with contextlib.suppress(ChildProcessError, ProcessLookupError):
            os.kill(relay.recorder_pid, signal.SIGKILL)
            os.waitpid(relay.recorder_pid, 0)
    lost = events(home, "mcp-unrecorded", "s")
    assert {e["direction"] for e in lost} == {C2S, S2C}
    for e in lost:
        assert 0 < e["bytes"] <= len(got) and 1 <= e["messages"] <= 3
        assert "recorder stopped or was stuck" in e["reason"]


ANSWER_AT_ONCE = """
import json, sys
for line in sys.stdin.buffer:
    answer = {"jsonrpc": "2.0", "id": json.loads(line)["id"], "result": {}}
    sys.stdout.buffer.write(json.dumps(answer).encode() + b"\\n")
    sys.stdout.buffer.flush()
"""


def test_a_response_is_never_taken_for_the_next_request_with_its_id(home: Home) -> None:
    # A server that answers at once and a client that reuses one id: heads are written
    # after their chunk has gone on, so a response's head can reach the pipe before its
    # request's; were they recorded in that order, a response would be matched to the
    # request after it. The numbers taken before passing on keep cause before effect.
    argv = run_argv(home, [sys.executable, "-c", ANSWER_AT_ONCE], "--mcp")
    proc = subprocess.Popen(argv, env=home.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    calls = 400
    for i in range(calls):
        proc.stdin.write(_request(1, i % 7 + 1))
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    reqs, resps = events(home, "mcp-request"), events(home, "mcp-response")
    assert [r["tool"] for r in reqs] == ["t" * (i % 7 + 1) for i in range(calls)]
    assert len(resps) == calls
    assert all(q["time"] <= r["time"] for q, r in zip(reqs, resps, strict=True))
    assert [r["size"] for r in resps] == [len(b'{"jsonrpc": "2.0", "id": 1, "result": {}}')] * calls


def test_a_request_still_unanswered_is_recorded(home: Home) -> None:
    # Small requests do not wake the recorder (the server's output does); it still looks
    # for copies now and then, so a call the server never answers is on record while the
    # session runs.
    argv = run_argv(home, [sys.executable, "-c", "import sys; sys.stdin.read()"], "--mcp")
    proc = subprocess.Popen(argv, env=home.env, stdin=subprocess.PIPE)
    assert proc.stdin
    rec = _relay_child(proc.pid, b"mcpshim-record")
    poll(lambda: "poll" in Path(f"/proc/{rec}/wchan").read_text(), "the recorder to wait")
    proc.stdin.write(_request(7, 3))
    proc.stdin.flush()

    def recorded() -> list[dict[str, Any]]:
        return events(home, "mcp-request") if home.loc.log_file.exists() else []

    [req] = poll(recorded, "the request's record", 10)
    assert req["id"] == 7 and req["tool"] == "ttt"
    assert proc.poll() is None
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0


def test_the_recorder_is_a_helper_behind_the_others(home: Home, tmp_path: Path) -> None:
    argv = run_argv(home, [sys.executable, "-c", "import sys; sys.stdin.read()"], "--mcp")
    proc = subprocess.Popen(argv, env=home.env, stdin=subprocess.PIPE)
    assert proc.stdin
    relay = _relay_child(proc.pid)
    rec = _relay_child(proc.pid, b"mcpshim-record")
    assert os.sched_getscheduler(rec) == os.SCHED_BATCH
    assert os.getpriority(os.PRIO_PROCESS, rec) == os.getpriority(os.PRIO_PROCESS, 0) + 10
    # It holds the copy channel's five read ends and stderr, nothing of the client's.
    fds = sorted(int(n) for n in os.listdir(f"/proc/{rec}/fd"))
    assert fds[0] == 2 and len(fds) == 6, fds
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert _family_records(home, rec) == [] and _family_records(home, relay) == []
    assert not os.path.exists(f"/proc/{rec}")  # reaped


def test_copies_are_put_back_in_the_order_they_were_read() -> None:
    order = InOrder()
    # Number 1 (the response) reaches the pipe first: it waits for number 0.
    assert order.add(1, 1, 2.0, b"response", 20) == []
    # Number 0 came in two parts (its pipe filled): nothing is due before the last.
    assert order.add(0 | MORE, 0, 1.0, b"req", 10) == []
    due = [(0, 1.0, b"req", 10), (0, 1.0, b"uest", 10), (1, 2.0, b"response", 20)]
    assert order.add(0, 0, 1.0, b"uest", 10) == due
    assert order.add(1 | EOF, 2, 3.0, b"") == [(1, 3.0, None, -1)]
    # A number whose head never came (its pump died) holds back the rest until the end.
    assert order.add(0, 4, 5.0, b"late", 30) == []
    assert order.rest() == [(0, 5.0, b"late", 30)]


def test_a_loss_releases_the_numbers_it_covers_and_late_copies_still_come() -> None:
    order = InOrder()
    assert order.add(0, 0, 1.0, b"a", 7) == [(0, 1.0, b"a", 7)]
    # Number 2 was dropped; number 1's pump took it before and gives its copy after.
    assert order.add(LOST, 2, 2.0, b"loss") == [(LOSS_PART, 2.0, b"loss", -1)]
    assert order.add(0 | MORE, 1, 1.5, b"la", 8) == []  # due once whole, not before
    assert order.add(0, 1, 1.5, b"te", 8) == [(0, 1.5, b"la", 8), (0, 1.5, b"te", 8)]
    assert order.add(1, 3, 3.0, b"b", 9) == [(1, 3.0, b"b", 9)]
    # Held for number 4 (dropped): the loss releases it, after what it covers.
    assert order.add(1, 5, 5.0, b"c", 9) == []
    due = [(LOSS_PART, 4.0, b"loss", -1), (1, 5.0, b"c", 9)]
    assert order.add(LOST, 4, 4.0, b"loss") == due
    assert order.rest() == []


def test_a_flood_costs_the_recorder_the_flood_not_the_lines_after_it(home: Home) -> None:
    # Issue 41 item 3: one line far past the backlog's limit while the recorder is stopped,
    # then small messages. Copies past the limit are dropped, but a loss keeps the short
    # lines that go by while it is open: every message but the flood is recorded, both
    # ways, and the loss counts the flood alone. (Before, the lines after the flood went
    # with it, and review said "no answer" for calls that were answered.)
    limit = 4 << 20
    relay = _logged_relay(home, limit)
    stream = [_request(1, 10), b"x" * (16 << 20) + b"\n", *(_request(i, 10) for i in (2, 3, 4))]
    got = _through(relay, stream, lambda: os.kill(relay.recorder_pid, signal.SIGSTOP))
    assert got == b"".join(stream)
    assert relay.server_done(60)
    os.kill(relay.recorder_pid, signal.SIGCONT)
    relay.finish(60)
    assert relay.reap() == 0
    for direction in (C2S, S2C):
        mine = [e for e in events(home, None, "s") if e.get("direction") == direction]
        assert [e["id"] for e in mine if e["kind"] == "mcp-request"] == [1, 2, 3, 4]
        lost = [e for e in mine if e["kind"] == "mcp-unrecorded"]  # one loss or more
        assert sum(e["messages"] for e in lost) == 1  # one line, counted once
        assert limit < sum(e["bytes"] for e in lost) <= 16 << 20
