"""`mcpshim log --follow`: every record once, in order per writer, through rotations; time
order across writers; a clean stop on SIGINT and on a closed pipe."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from mcpshim.log import eventlog, execlog, follow, rotation
from mcpshim.log.follow import Follower
from tests.fixtures.home import Home, dash_path, install

MCPSHIM = [sys.executable, "-m", "mcpshim"]
SHIM_WRITERS = 6
EVENT_WRITERS = 2
EACH = 150

LOOP = r"""
shim=$1 w=$2 n=$3
big=$(printf "%08192d" 0 | tr 0 e)
i=0
while [ "$i" -lt "$n" ]; do
	if [ $((i % 10)) -eq 1 ]; then "$shim" "w$w" "$i" "$big"; else "$shim" "w$w" "$i"; fi
	i=$((i + 1))
done
"""


def _follow(home: Home, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*MCPSHIM, "log", "-f", *args],
        env=home.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_ready(home: Home, proc: subprocess.Popen[bytes]) -> list[bytes]:
    """Nudge records in until the follower prints one: from then on it reads everything."""
    assert proc.stdout is not None
    lines: list[bytes] = []

    def read() -> None:
        assert proc.stdout is not None
        lines.extend(iter(proc.stdout.readline, b""))

    t = threading.Thread(target=read, daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    while not lines and time.monotonic() < deadline:
        eventlog.append_event(home.loc, "ready", {"time": _now()})
        time.sleep(0.3)
    assert lines, "the follower printed nothing"
    return lines


def _now(delta: float = 0.0) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=delta)).isoformat()


def _event_writer(home: Home, w: int) -> None:
    log = eventlog.EventLog(home.loc)
    for i in range(EACH):
        log.append("burst", {"time": _now(), "writer": f"e{w}", "seq": i})
        time.sleep(0.002)


@pytest.mark.timeout(600)
def test_eight_writers_and_rotations_every_record_once_in_order(
    home: Home, interpreter: str
) -> None:
    """Six shells (dash -c, bash -c) run the shim in a loop (the shim itself under dash, or
    bash as sh), every tenth record over 8 KiB (a spill file); two recorders append events;
    the log rotates every 30 ms meanwhile."""
    install(home, ["true"], interpreter)
    home.loc.log_file.touch()
    proc = _follow(home, "--format", "json")
    lines = _wait_ready(home, proc)
    shim = str(home.loc.shim_dir / "true")
    shells = [
        subprocess.Popen(
            [("dash", "bash")[w % 2], "-c", LOOP, "loop", shim, str(w), str(EACH)], env=home.env
        )
        for w in range(SHIM_WRITERS)
    ]
    threads = [threading.Thread(target=_event_writer, args=(home, w)) for w in range(EVENT_WRITERS)]
    for t in threads:
        t.start()
    rotations = 0
    while any(p.poll() is None for p in shells) or any(t.is_alive() for t in threads):
        rotation.rotate(home.loc)
        rotations += 1
        time.sleep(0.03)
    assert [p.wait() for p in shells] == [0] * SHIM_WRITERS
    for t in threads:
        t.join()
    time.sleep(2.5)  # the follower's lag and a poll
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 0
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert "Traceback" not in err and "skipped" not in err, err

    got: dict[str, list[int]] = {}
    for line in lines:
        doc = json.loads(line)
        if doc["kind"] == "exec":
            got.setdefault(doc["args"][0], []).append(int(doc["args"][1]))
        elif doc["kind"] == "burst":
            got.setdefault(doc["writer"], []).append(doc["seq"])
    assert rotations >= 20 and len(execlog.segments(home.loc)) > 20
    assert any(home.loc.spill_dir.iterdir())  # the long records went through spill files
    assert len(got) == SHIM_WRITERS + EVENT_WRITERS
    for writer, seqs in got.items():
        assert seqs == list(range(EACH)), writer  # every record once, in the writer's order


def test_two_rotations_between_polls_hide_no_segment(home: Home) -> None:
    home.loc.log_dir.mkdir(parents=True)
    home.loc.log_file.touch()
    fol = Follower(home.loc, [], lag=0.0)
    assert fol.start(history=False) == []

    def note(n: int) -> None:
        eventlog.append_event(home.loc, "n", {"time": _now(), "n": n})

    note(0)
    rotation.rotate(home.loc)  # the live log the follower holds is now a segment
    note(1)
    rotation.rotate(home.loc)  # a segment the follower never saw as the live log
    note(2)
    got = [r.data["n"] for r in fol.poll() if isinstance(r, execlog.EventRecord)]
    note(3)
    got += [r.data["n"] for r in fol.flush() if isinstance(r, execlog.EventRecord)]
    assert got == [0, 1, 2, 3]


def _ns(recs: list[execlog.Record]) -> list[int]:
    return [r.data["n"] for r in recs if isinstance(r, execlog.EventRecord) and r.kind == "n"]


def test_a_follower_started_late_reads_from_its_mark_through_two_rotations(home: Home) -> None:
    """`run --otlp`'s stream: the log's end is marked before the session, the follower
    starts after two rotations and reads on from the mark, nothing before it."""
    home.loc.log_dir.mkdir(parents=True)

    def note(n: int) -> None:
        eventlog.append_event(home.loc, "n", {"time": _now(), "n": n})

    note(-2)
    rotation.rotate(home.loc)
    note(-1)
    at = follow.mark(home.loc)
    note(0)
    rotation.rotate(home.loc)  # the marked file is a segment now
    note(1)
    rotation.rotate(home.loc)
    note(2)
    fol = Follower(home.loc, [], lag=None)
    got = _ns(fol.start(history=False, since=at))
    note(3)
    rotation.rotate(home.loc)
    note(4)
    rotation.rotate(home.loc)
    note(5)
    got += _ns(fol.poll())
    assert got == [0, 1, 2, 3, 4, 5]
    fol.close()
    # The marked file dropped since (retention): every segment there is was written after it.
    rotation.rotate(home.loc, keep=2)
    assert [p.name for p in execlog.segments(home.loc)][:2] == [
        "exec.log.000005",
        "exec.log.000006",
    ]
    assert _ns(Follower(home.loc, [], lag=None).start(False, since=at)) == [4, 5]
    # No live log when marked: everything is after the mark.
    assert _ns(Follower(home.loc, [], lag=None).start(False, follow.Mark(None, 0))) == [4, 5]


def test_a_tail_begins_at_the_end_and_waits_for_a_log_that_is_not_there_yet(home: Home) -> None:
    tail = follow.Follower.tail(home.loc)  # no log directory at all yet
    assert tail.poll() == []
    home.loc.log_dir.mkdir(parents=True)
    eventlog.append_event(home.loc, "n", {"time": _now(), "n": 0})
    rotation.rotate(home.loc)
    eventlog.append_event(home.loc, "n", {"time": _now(), "n": 1})
    assert _ns(tail.poll()) == [0, 1]  # the log it found, from its start, in log order
    later = follow.Follower.tail(home.loc)
    eventlog.append_event(home.loc, "n", {"time": _now(), "n": 2})
    assert _ns(later.poll()) == [2] and _ns(tail.poll()) == [2]
    tail.close()
    later.close()


def test_records_come_out_in_time_order_across_writers(home: Home) -> None:
    """The recorder may write an mcp-request after the execs the call caused: the follower
    prints it first, as its time says."""
    install(home, ["true"], dash_path())
    home.loc.log_file.touch()
    fol = Follower(home.loc, [], lag=1.0)
    fol.start(history=False)
    asked = _now()
    time.sleep(0.05)
    subprocess.run([str(home.loc.shim_dir / "true"), "caused"], env=home.env, check=True)
    eventlog.append_event(home.loc, "mcp-request", {"time": asked, "tool": "t"})
    assert fol.poll() == []  # both wait for the lag
    time.sleep(1.3)
    kinds = [r.kind for r in fol.poll()]
    assert kinds == ["mcp-request", "exec"]


def test_closed_pipe_ends_it_quietly(home: Home) -> None:
    install(home, ["true"], dash_path())
    subprocess.run([str(home.loc.shim_dir / "true"), "old"], env=home.env, check=True)
    cmd = f"{' '.join(MCPSHIM)} log -f --since 1h --format json | head -n 1"
    out = subprocess.run(
        ["sh", "-c", cmd], env=home.env, capture_output=True, text=True, timeout=120
    )
    # head exited after one line; the follower saw its pipe closed and left, quietly
    assert json.loads(out.stdout)["args"] == ["old"]
    assert out.returncode == 0 and "Traceback" not in out.stderr


def test_session_filter_and_ecs(home: Home) -> None:
    install(home, ["true"], dash_path())
    subprocess.run(
        [str(home.loc.shim_dir / "true"), "mine"],
        env={**home.env, "MCPSHIM_SESSION": "S-follow-1"},
        check=True,
    )
    proc = _follow(home, "--session", "S-follow", "--since", "1h", "--format", "ecs")
    time.sleep(1.5)
    subprocess.run([str(home.loc.shim_dir / "true"), "other"], env=home.env, check=True)
    subprocess.run(
        [str(home.loc.shim_dir / "true"), "mine", "again"],
        env={**home.env, "MCPSHIM_SESSION": "S-follow-1"},
        check=True,
    )
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    docs = [json.loads(x) for x in out.splitlines()]
    assert [d["process"]["args"][1:] for d in docs] == [["mine"], ["mine", "again"]]
    assert {d["labels"]["mcpshim_session"] for d in docs} == {"S-follow-1"}
