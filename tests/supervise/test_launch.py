"""`mcpshim run` starts its server before click loads (supervise.launch, issue 42 item 2):
the parser that decides it takes a command line exactly as click's `run` does or leaves it
to click; the server starts with few modules loaded; the session still announces itself
before any of its processes records anything; a launch is adopted only for its options."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from mcpshim.cli.run_cmd import run as run_command
from mcpshim.errors import McpshimError
from mcpshim.log import execlog
from mcpshim.supervise import launch
from mcpshim.supervise.runargs import RunArgs, parse_run_args
from tests.fixtures.home import Home, install
from tests.fixtures.runhelp import MCPSHIM, only_session

OPTION_PIECES: list[list[str]] = [
    ["--mcp"], ["--mcp=1"], ["--no-trace"], ["--trace"], ["--trace=on"], ["--trace=auto"],
    ["--trace", "off"], ["--trace", "x"], ["--trace="], ["--zdotdir"], ["--no-zdotdir"],
    ["--name", "srv"], ["--name=a=b"], ["--name", "-x"], ["--name", "--mcp"], ["--name"],
    ["--sample-ms", "10"], ["--sample-ms", "9"], ["--sample-ms", "010"], ["--sample-ms", "1_0"],
    ["--sample-ms", " 50"], ["--sample-ms=250"], ["--grace", "0"], ["--grace", "0.5"],
    ["--grace", "1e3"], ["--grace", "-1"], ["--grace=2."], ["--on-exit", "terminate"],
    ["--on-exit", "Report"], ["--on-exit=report"], ["--on-departure", "report"],
    ["--on-departure", "terminate"], ["--dir", "{tmp}/shims"], ["--dir", "{tmp}/a-file"],
    ["--log-dir={tmp}/log"], ["--dir="], ["--lock"], ["--lock", "x.lock"], ["--enforce"],
    ["--contain"], ["--contain=off"], ["--contain-write", "{tmp}"], ["--otlp", "http://x"],
    ["-h"], ["--help"], ["--foo"], ["-x"], ["-"],
]  # fmt: skip
COMMANDS: list[list[str]] = [
    ["--", "node", "server.js"], ["node", "--mcp"], ["--", "--", "x"], ["--"], [],
    ["--", "-", "y"], ["cmd"],
]  # fmt: skip


def click_args(argv: list[str]) -> RunArgs | None:
    """What click's `run` makes of argv, in the launch's terms (None: click refuses it, or
    it asks for an option a launch never takes)."""
    try:
        # as under the group: click keeps the help option it makes on the command
        ctx = run_command.make_context("run", list(argv), help_option_names=["-h", "--help"])
    except (click.exceptions.Exit, click.ClickException):
        return None
    p: dict[str, Any] = ctx.params
    command = p["command"][1:] if p["command"][:1] == ("--",) else p["command"]
    if p["no_trace"] and p["trace"] == "on":
        return None  # run refuses the two together
    if not command or p["lock_file"] or p["enforce"] or p["otlp"] or p["contain_write"]:
        return None
    if p["on_departure"] != "report" or p["contain"] != "off":
        return None
    trace = "off" if p["no_trace"] else p["trace"]
    return RunArgs(p["shim_dir"], p["log_dir"], p["name"], p["sample_ms"], p["on_exit"],
                   p["grace"], trace, p["zdotdir"], p["mcp"], tuple(command))  # fmt: skip


def samples(tmp: Path) -> list[list[str]]:
    (tmp / "a-file").write_text("")
    pieces = [[a.format(tmp=tmp) for a in piece] for piece in OPTION_PIECES]
    out = [[*p, *c] for p in pieces for c in COMMANDS]
    rnd = random.Random(42)
    for _ in range(3000):
        chosen = rnd.sample(pieces, rnd.randint(0, 4))
        out.append([*itertools.chain(*chosen), *rnd.choice(COMMANDS)])
    return out


def test_the_parser_takes_a_command_line_as_click_does_or_leaves_it(tmp_path: Path) -> None:
    taken = 0
    for argv in samples(tmp_path):
        fast = parse_run_args(argv)
        if fast is not None:
            taken += 1
            assert fast == click_args(argv), argv
    assert taken > 500  # the common shapes are taken, not left to click
    # a client config's command line
    assert parse_run_args(["--mcp", "--", "npx", "-y", "srv"]) == RunArgs(
        mcp=True, command=("npx", "-y", "srv")
    )


def test_the_server_starts_before_click_and_the_session_s_modules_load(tmp_path: Path) -> None:
    code = f"""
import os, sys, time
from mcpshim.supervise import launch
started = launch.prelaunch(["--mcp", "--no-trace", "--log-dir", {str(tmp_path / "log")!r},
                            "--", "/bin/true"])
assert started is not None and started.child_pid > 0
while not started.command_ended:  # reaped by the launch's thread until a supervisor runs
    time.sleep(0.01)
started.hand_over()
started.watcher.finish(done=True)
print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] in ("click", "psutil")
                      or m.startswith(("mcpshim.cli", "mcpshim.log.redact", "mcpshim.relay",
                                       "mcpshim.trace.parse", "mcpshim.trace.records",
                                       "mcpshim.supervise.supervisor", "mcpshim.supervise.sampler",
                                       "mcpshim.proc")))))
"""
    home = tmp_path / "h"
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "XDG_DATA_HOME": str(home / "d"),
           "XDG_STATE_HOME": str(home / "s"), "XDG_CONFIG_HOME": str(home / "c")}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


def test_the_session_announces_itself_before_its_command_s_first_record(home: Home) -> None:
    """A shimmed command that records itself at once: its exec record comes after the
    session's mcp-session record (attribution keys on it), as when click started it."""
    install(home, ["sh"])
    shim_sh = str(home.loc.shim_dir / "sh")
    argv = [*MCPSHIM, "run", "--dir", str(home.loc.shim_dir), "--mcp", "--no-trace", "--",
            shim_sh, "-c", "exit 3"]  # fmt: skip
    done = subprocess.run(argv, env=home.env, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 3, done.stderr
    sid = only_session(home)
    kinds = [
        r.kind
        for r in home.records()
        if (r.session if isinstance(r, execlog.ExecRecord) else r.data.get("session")) == sid
    ]
    assert kinds[0] == "mcp-session" and "exec" in kinds, kinds


def test_a_launch_is_adopted_only_for_the_options_it_was_started_for() -> None:
    started = RunArgs(mcp=True, command=("x",))

    class Started:  # what adopt compares: its options
        args = started

    launch._LAUNCHED.append(Started())  # type: ignore[arg-type]
    with pytest.raises(McpshimError, match="run started for"):
        launch.adopt(RunArgs(mcp=False, command=("x",)))
    assert launch.adopt(started) is None  # nothing left to adopt
    launch._LAUNCHED.append(Started())  # type: ignore[arg-type]
    with pytest.raises(McpshimError):
        launch.adopt(None)  # click asked for an option no launch takes


def _relayed_hello(home: Home, server: str) -> list[execlog.EventRecord]:
    """`run --mcp --no-trace` of a Python SERVER that prints `hello` and reads stdin: the
    client reads the line and closes; the session's event records."""
    argv = [*MCPSHIM, "run", "--dir", str(home.loc.shim_dir), "--mcp", "--no-trace", "--",
            sys.executable, "-c", server]  # fmt: skip
    proc = subprocess.Popen(argv, env=home.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline() == b"hello\n"
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    sid = only_session(home)
    return [r for r in home.records() if isinstance(r, execlog.EventRecord)
            and r.data.get("session") == sid]  # fmt: skip


def test_a_relayed_session_loads_the_rest_once_its_server_has_answered(home: Home) -> None:
    """`run --mcp` started before click: its supervisor (and the session-start record)
    comes once the server's first output has reached the client, not while the server
    starts (a second here): the record follows the relayed line, which the server wrote
    only after its second."""
    server = "import sys, time; time.sleep(1); print('hello', flush=True); sys.stdin.read()"
    got = {r.kind: r.data for r in _relayed_hello(home, server)}
    assert got["mcp-unparsed"]["direction"] == "server->client"
    assert got["session-start"]["time"] > got["mcp-unparsed"]["time"]


def test_what_ends_before_the_supervisor_loads_is_reaped_when_it_ends(home: Home) -> None:
    """An orphan that ends while the rest of `run` loads is reaped then, by the launch
    (keep_watch), not once the supervisor's loop runs: a late `reaped` record read as a
    process that outlived its tool call (MCS501)."""
    server = ("import subprocess, sys, time; subprocess.run(['sh', '-c', 'sleep 0.1 &']); "
              "time.sleep(0.5); print('hello', flush=True); sys.stdin.read()")  # fmt: skip
    recs = _relayed_hello(home, server)
    [start] = [r.data for r in recs if r.kind == "session-start"]
    reaped = [r.data for r in recs if r.kind == "reaped"]
    assert reaped and all(r["time"] < start["time"] for r in reaped), (reaped, start)
