"""mcpshim log: text, json (lossless), ecs; filters; streaming; torn records; rotation."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

from mcpshim.log import eventlog, execlog
from tests.fixtures.home import Home, dash_path, install

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPSHIM, *args], env=home.env, capture_output=True, text=True, timeout=300
    )


def _seed(home: Home) -> None:
    install(home, ["true", "sh"], dash_path())
    env = {**home.env, "MCPSHIM_SESSION": "sess-a"}
    subprocess.run(
        [os.fsencode(home.loc.shim_dir / "true"), b"\x1b[2J\nclear", b"\xff\xfe"],
        env=env,
        check=True,
    )
    subprocess.run([str(home.loc.shim_dir / "sh"), "-c", "exit 0"], env=home.env, check=True)


def test_text_escapes_control_characters(home: Home) -> None:
    _seed(home)
    out = cli(home, "log")
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout
    lines = out.stdout.splitlines()
    assert lines[0].startswith("TIME (UTC)") and len(lines) == 3
    assert "$'\\e[2J\\nclear' $'\\xff\\xfe'" in lines[1]
    assert "sess-a" in lines[1] and lines[1][:4].isdigit() and "Z " in lines[1]


def test_json_is_utf8_and_lossless(home: Home) -> None:
    _seed(home)
    out = subprocess.run(
        [*MCPSHIM, "log", "--format", "json"], env=home.env, capture_output=True, check=True
    )
    docs = [json.loads(line) for line in out.stdout.decode("utf-8").splitlines()]
    first = docs[0]
    assert first["schema"] == "mcpshim.log/1" and first["kind"] == "exec"
    args = [a.encode() for a in first["args"]]
    for idx, b64 in first["args_b64"].items():
        args[int(idx)] = base64.b64decode(b64)
    assert args == [b"\x1b[2J\nclear", b"\xff\xfe"]
    assert first["session"] == "sess-a" and docs[1]["session"] is None
    assert first["entity_id"] != docs[1]["entity_id"]


def test_ecs_documents(home: Home) -> None:
    _seed(home)
    out = cli(home, "log", "--format", "ecs")
    doc = json.loads(out.stdout.splitlines()[1])
    assert doc["event"] == {
        "kind": "event",
        "category": ["process"],
        "type": ["start"],
        "module": "mcpshim",
        "dataset": "mcpshim.exec",
    }
    p = doc["process"]
    assert p["name"] == "sh" and p["args"] == [p["executable"], "-c", "exit 0"]
    assert p["args_count"] == 3 and p["command_line"] == f"{p['executable']} -c 'exit 0'"
    assert p["working_directory"] == os.getcwd()
    assert {"pid", "start", "entity_id", "parent"} <= set(p)
    assert doc["@timestamp"].endswith("Z") and doc["user"]["id"] == str(os.getuid())


def test_filters(home: Home) -> None:
    _seed(home)
    assert len(cli(home, "log", "--session", "sess-a").stdout.splitlines()) == 2
    recs = home.execs()
    out = cli(home, "log", "--pid", str(recs[1].pid), "--format", "json")
    assert [json.loads(x)["pid"] for x in out.stdout.splitlines()] == [recs[1].pid]
    assert len(cli(home, "log", "--since", "1h").stdout.splitlines()) == 3
    assert len(cli(home, "log", "--since", "2999-01-01T00:00:00Z").stdout.splitlines()) == 1
    bad = cli(home, "log", "--since", "yesterday-ish")
    assert bad.returncode == 2 and "--since" in bad.stderr


def test_torn_trailing_record_is_reported_not_a_traceback(home: Home) -> None:
    _seed(home)
    with home.loc.log_file.open("ab") as fh:
        fh.write(b"\0R\0=1\0=exec\0=half a rec")
    out = cli(home, "log")
    assert out.returncode == 0
    assert len(out.stdout.splitlines()) == 3
    assert "torn trailing record" in out.stderr and "Traceback" not in out.stderr


def test_events_written_by_python_read_back_in_order(home: Home) -> None:
    _seed(home)
    eventlog.append_event(home.loc, "note", {"time": "2026-01-01T00:00:00Z", "text": "a\0b\nc"})
    recs = home.records()
    assert isinstance(recs[-1], execlog.EventRecord)
    assert recs[-1].data["text"] == "a\0b\nc"


def test_rotate_command_and_reading_across_segments(home: Home) -> None:
    _seed(home)
    out = cli(home, "log", "rotate")
    assert "rotated to" in out.stdout
    subprocess.run([str(home.loc.shim_dir / "true"), "after"], env=home.env, check=True)
    assert len(home.execs()) == 3
    assert cli(home, "log", "rotate").returncode == 0
    assert cli(home, "log", "rotate", "--keep", "1").returncode == 0
    assert [p.name for p in execlog.segments(home.loc)] == ["exec.log.000002", "exec.log"]
    assert [r.args for r in home.execs()] == [(b"after",)]


def test_log_streams_with_flat_memory(home: Home, tmp_path: Path) -> None:
    _seed(home)
    one = home.loc.log_file.read_bytes()
    small = _peak_rss(home)
    with home.loc.log_file.open("ab") as fh:
        for _ in range(30_000):  # about 20 MB of real records
            fh.write(one)
    big = _peak_rss(home)
    assert home.loc.log_file.stat().st_size > 15_000_000
    assert big - small < 40_000  # KiB: one chunk, not the log


def _peak_rss(home: Home) -> int:
    code = (
        "import resource, sys, runpy; sys.argv=['mcpshim','log','--format','json'];"
        "sys.stdout=open('/dev/null','w');\n"
        "try: runpy.run_module('mcpshim', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=home.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return int(out.stderr.strip().splitlines()[-1])


def test_no_log_is_an_input_error_with_nothing_on_stdout(home: Home) -> None:
    for fmt in ("text", "json", "ecs"):
        out = cli(home, "log", "--format", fmt)
        assert (out.returncode, out.stdout) == (2, ""), out.stderr
        assert out.stderr.startswith("mcpshim: error: no exec log at ")


def _nulls(value: object, path: str = "") -> list[str]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _nulls(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _nulls(v, f"{path}[{i}]")]
    return [path] if value is None else []


def test_ecs_says_a_process_known_only_as_a_parent_as_what_it_is(home: Home) -> None:
    # Issue 41 item 10: a shell that ran a shimmed command, started by absolute path (no
    # shim saw it, no trace): its first shimmed child keeps its argv. ECS used to emit it
    # as a `process start` with `parent.pid: null`, `executable: "dash"` and its child's
    # timestamp; it is an info event with what is known, and no field is null.
    install(home, ["true"], dash_path())
    line = f"{home.loc.shim_dir / 'true'} x; exit 0"
    subprocess.run([dash_path(), "-c", line], env=home.env, check=True)
    out = cli(home, "log", "--format", "ecs")
    assert out.returncode == 0, out.stderr
    docs = [json.loads(x) for x in out.stdout.splitlines()]
    [shell] = [d for d in docs if d["event"]["type"] != ["start"]]
    [child] = [d for d in docs if d["event"]["type"] == ["start"]]
    assert shell["event"]["type"] == ["info"] and "no exec of it seen" in shell["message"]
    p = shell["process"]
    assert p["args"] == ["dash" if "/" not in p["args"][0] else p["args"][0], "-c", line]
    assert "executable" not in p and "parent" not in p
    assert shell["@timestamp"] == p["start"] and p["pid"] == child["process"]["parent"]["pid"]
    assert p["entity_id"] == child["process"]["parent"]["entity_id"]
    assert [_nulls(d) for d in docs] == [[], []]
