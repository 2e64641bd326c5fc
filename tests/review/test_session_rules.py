"""Session rules (MCS3xx) over real `mcpshim run` sessions, through `review` itself."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpshim.review.catalogue import rules as _catalogue
from mcpshim.review.policy import default_policy
from mcpshim.review.rules.session_rules import session_findings
from tests.fixtures.contract import fail_on_of, findings_code
from tests.fixtures.home import Home, install
from tests.fixtures.runhelp import MCPSHIM, events, kill_all, only_session, run, session_pids

RULES = _catalogue()

# Opens a listener and an outbound connection to it, then holds both until the supervisor
# has written its socket records (read back from the log), so the test does not race it.
SOCKETS = r"""
import socket, sys, time
bind, peer, log = sys.argv[1], sys.argv[2], sys.argv[3]
srv = socket.socket(); srv.bind((bind, 0)); srv.listen()
port = srv.getsockname()[1]
out = socket.create_connection((peer, port)); acc, _ = srv.accept()
deadline = time.monotonic() + 60
needle = f":{port}".encode()
while time.monotonic() < deadline:
    data = b"".join(open(p, "rb").read() for p in [log])
    if data.count(needle) >= 3:
        break
    time.sleep(0.05)
"""


def review_json(home: Home, *opts: str) -> dict[str, Any]:
    res = subprocess.run([*MCPSHIM, "review", "--dir", str(home.loc.shim_dir), "--format", "json",
                          "--fail-on", "high", *opts], capture_output=True, env=home.env,
                         check=False)  # fmt: skip
    doc: dict[str, Any] = json.loads(res.stdout)
    assert res.returncode == findings_code(doc, fail_on_of(opts, "high")), res.stderr
    return doc


def by_rule(doc: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    return [f for f in doc["findings"] if f["rule"] == rule]


def own_address() -> str:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.123", 9))  # no packet is sent: this only picks a route
        addr = str(s.getsockname()[0])
    except OSError:
        addr = "127.0.0.1"
    finally:
        s.close()
    if addr.startswith("127."):
        pytest.skip("no non-loopback address to make an outbound connection to")
    return addr


def test_rules_are_registered() -> None:
    for rid in ("MCS301", "MCS302", "MCS303", "MCS304", "MCS305"):
        assert rid in RULES and RULES[rid].remediation


def test_survivor_and_unshimmed_in_review(home: Home, interpreter: str) -> None:
    install(home, ["git"], interpreter)
    git = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin"}, check=True).stdout.strip()  # fmt: skip
    # git by absolute path, kept alive by its stdin for a second so the sampler sees it.
    script = f"/bin/sh -c 'sleep 1'; sleep 1 | {git} hash-object --stdin; sleep 300 & exit 0"
    res = run(home, ["sh", "-c", script], "--no-trace")  # what sampling alone finds
    assert res.returncode == 0
    sid = only_session(home)
    try:
        doc = review_json(home, "--session", sid)
    finally:
        kill_all(session_pids(sid))
    [surv] = by_rule(doc, "MCS301")
    assert surv["severity"] == "medium" and "left running" in surv["message"]
    assert surv["evidence"][0]["where"].startswith("exec.log@")
    unshimmed = {f["message"]: f["severity"] for f in by_rule(doc, "MCS302")}
    assert not any(m.startswith("git") for m in unshimmed)  # shimmed: MCS405's, with a cause
    [bypass] = by_rule(doc, "MCS405")
    assert bypass["severity"] == "medium"
    assert bypass["message"] == f"git ran without its shim: called by absolute path ({git})"
    assert bypass["evidence"][0]["source"] == "observed"
    # the sampled `/bin/sh -c 'sleep 1'`: one statement, its line (issue 27), not MCS302
    lines = [f["message"] for f in doc["findings"] if f["rule"] in ("MCS105", "MCS106")]
    assert any("started by absolute path" in m and "sleep 1" in m for m in lines), lines
    assert not any(m.startswith("dash -c") and "server" in m for m in unshimmed)
    # the server itself (the session's command) is not a finding
    [start] = events(home, "session-start")
    pids = {e["pid"] for f in by_rule(doc, "MCS302") for e in f["evidence"]}
    assert start["child_pid"] not in pids


def test_terminated_survivor_is_low(home: Home) -> None:
    res = run(home, ["sh", "-c", "sleep 300 & exit 0"], "--on-exit", "terminate")
    assert res.returncode == 0
    findings = session_findings(home.records(), default_policy())
    [surv] = [f for f in findings if f.rule.id == "MCS301"]
    assert surv.level.label == "low" and "terminated" in surv.message


@pytest.mark.parametrize("traced", [False, True], ids=["sampled", "traced"])
def test_listening_outbound_and_credentials(home: Home, tmp_path: Path, traced: bool) -> None:
    """Untraced, the sampler's sockets are the evidence (MCS303, MCS304); traced, the
    kernel's socket calls are (MCS303, MCS306) and the samples say nothing twice."""
    peer = own_address()
    script = tmp_path / "sockets.py"
    script.write_text(SOCKETS)
    env = {**home.env, "DEPLOY_TOKEN": "not-a-real-token-value"}
    home.loc.log_dir.mkdir(parents=True, exist_ok=True)
    home.loc.log_file.touch()
    res = run(home, [sys.executable, str(script), "0.0.0.0", peer, str(home.loc.log_file)],
              *(() if traced else ("--no-trace",)), env=env)  # fmt: skip
    assert res.returncode == 0
    socks = events(home, "socket")
    statuses = {(s["status"], s["raddr"] is None) for s in socks}
    assert ("LISTEN", True) in statuses and ("ESTABLISHED", False) in statuses
    [start] = events(home, "session-start")
    assert {s["pid"] for s in socks} == {start["child_pid"]}
    findings = session_findings(home.records(), default_policy())
    rules = {f.rule.id: f for f in findings}
    assert rules["MCS303"].level.label == "medium"
    assert "0.0.0.0:" in rules["MCS303"].message
    outbound = "MCS306" if traced else "MCS304"
    assert peer in rules[outbound].message
    assert ("MCS304" in rules) is not traced and ("MCS306" in rules) is traced
    assert rules[outbound].level.label == "medium"  # not loopback: remote's grade
    if traced:
        assert f"connected to {peer}:" in rules["MCS306"].message
        assert sum(f.rule.id == "MCS303" for f in findings) == 1  # the trace's, not a sample's
    assert "DEPLOY_TOKEN" in rules["MCS305"].message
    assert b"not-a-real-token-value" not in home.loc.log_file.read_bytes()
    # A destination the policy lists is not a finding.
    from dataclasses import replace

    allowing = replace(default_policy(), destinations=(peer,))
    assert outbound not in {f.rule.id for f in session_findings(home.records(), allowing)}


def test_loopback_listener_is_low(home: Home, tmp_path: Path) -> None:
    script = tmp_path / "sockets.py"
    script.write_text(SOCKETS)
    home.loc.log_dir.mkdir(parents=True, exist_ok=True)
    home.loc.log_file.touch()
    argv = [sys.executable, str(script), "127.0.0.1", "127.0.0.1", str(home.loc.log_file)]
    assert run(home, argv).returncode == 0
    findings = session_findings(home.records(), default_policy())
    listening = [f for f in findings if f.rule.id == "MCS303"]
    assert listening and all(f.level.label == "low" for f in listening)
    assert "MCS304" not in {f.rule.id for f in findings}  # loopback is not outbound


def test_repeated_connections_are_one_finding_with_each_process(home: Home) -> None:
    """A loop of connects to one unlisted destination is one MCS306 finding, whose evidence
    names each process that made them once (review files each under its own call)."""
    from tests.fixtures.nethelp import listening

    with listening() as port:
        one = f"import socket\nfor _ in range(5): socket.create_connection(('127.0.0.1', {port}))"
        again = f"subprocess.run([sys.executable, '-c', {one!r}])"
        code = f"import subprocess,sys\nexec({one!r})\n{again}"
        assert run(home, [sys.executable, "-c", code]).returncode == 0
    found = [f for f in session_findings(home.records(), default_policy()) if f.rule.id == "MCS306"]
    assert len(found) == 1, [f.message for f in found]
    [f] = found
    assert f.count == 2 and len({ev.data["pid"] for ev in f.evidence}) == 2
    name = os.path.basename(sys.executable)
    said = f"{name} connected to 127.0.0.1:{port} (tcp), which the policy does not list"
    assert f.message == said


# A fork that exec'd nothing (as Chromium's zygote children and its network service are)
# has no observed record of its own: it runs its parent's program, with its command line
FORKED_CONNECT = """
import os, socket, sys, time
if os.fork() == 0:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    time.sleep(1.5)  # a few samples' worth, held open
    os._exit(0)
os.wait()
"""


def test_a_sampled_socket_of_a_fork_is_named_by_its_program(home: Home) -> None:
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(srv.accept()[0]), daemon=True).start()
    try:
        port = srv.getsockname()[1]
        argv = [sys.executable, "-c", FORKED_CONNECT, str(port)]
        assert run(home, argv, "--no-trace").returncode == 0
    finally:
        for c in [*held, srv]:
            c.close()
    [sock] = [s for s in events(home, "socket") if s["status"] == "ESTABLISHED"]
    assert sock["exe"] == os.path.realpath(sys.executable)
    found = [f for f in session_findings(home.records(), default_policy()) if f.rule.id == "MCS304"]
    name = os.path.basename(os.path.realpath(sys.executable))
    assert [f.message.split(" connected")[0] for f in found] == [f"{name} (pid {sock['pid']})"]
