"""Issue 15: verdicts a reviewer can trust. One test (or more) per defect found on real
servers, each on real processes (shims, `mcpshim run`, the SDK's client and server)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession

from mcpshim.family.attribution import anchors_for, attribute, attribute_log
from mcpshim.family.images import parse_time
from mcpshim.log import execlog
from mcpshim.log.redact import is_credential_name
from mcpshim.review.engine import review
from mcpshim.review.findings import Finding
from mcpshim.review.pipeline import with_calls
from mcpshim.review.policy import default_policy, load_policy, parse_policy
from mcpshim.shim.manifest import load_manifest
from tests.fixtures.contract import fail_on_of, findings_code
from tests.fixtures.home import Home, install
from tests.fixtures.mcpscenario import kill_helpers, make_package, run_session
from tests.fixtures.reviewkit import Lab, of
from tests.fixtures.runhelp import MCPSHIM, events, only_session, run

needs_trace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")


@pytest.fixture
def lab(home: Home) -> Lab:
    return Lab(home)


def _review_cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPSHIM, "review", "--dir", str(home.loc.shim_dir), *args],
        env=home.env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _json(home: Home, *args: str) -> dict[str, Any]:
    res = _review_cli(home, "--format", "json", "--fail-on", "high", *args)
    doc: dict[str, Any] = json.loads(res.stdout)
    code = findings_code(doc, fail_on_of(["--fail-on", "high", *args]))
    assert res.returncode == code, res.stderr
    return doc


def _relayed_findings(home: Home, session: str) -> list[Finding]:
    result = review(
        home.records(),
        policy=default_policy(),
        session=session,
        shim_dir=str(home.loc.shim_dir),
        manifest=load_manifest(home.loc.shim_dir),
    )
    return with_calls(result, attribute_log(home.loc, session), default_policy()).findings


# ---- defect 1: calls a client awaits are never "overlapping" -----------------------------


async def _back_to_back(s: ClientSession) -> None:
    for _ in range(12):
        await s.call_tool("git_version", {})


@pytest.mark.parametrize("fork", [False, True], ids=["threads", "forked"])
def test_defect1_awaited_calls_are_never_ambiguous(home: Home, fork: bool) -> None:
    """Twelve calls, each sent as soon as the last one answered: a git starts a few ms
    after a response, and its start (10 ms ticks) overlaps both windows. Ordered by the
    kernel's pid counter, read by the relay as it passes each request and response on,
    each git is its own call's."""
    run_session(home, "S-b2b", _back_to_back, fork=fork)
    att = attribute(home.records(), "S-b2b", anchors_for(home.loc))
    assert att is not None and len(att.calls) == 12
    owners = sorted(
        (n.start or 0, n.pid, att.owner.get(n.id))
        for n in att.nodes()
        if n.images[0].command == "git"
    )
    assert [o for _s, _p, o in owners] == list(range(12)), owners
    from mcpshim.review.rules.mcp_rules import session_findings

    assert not [f for f in session_findings(att, default_policy()) if f.rule.id == "MCS503"]


# ---- defect 2: every occurrence stays attributed ----------------------------------------


async def _many_gits(s: ClientSession) -> None:
    await s.call_tool("shell", {"line": "git --version; " * 5 + "exit 0"})
    await anyio.sleep(0.1)
    await s.call_tool("git_version", {})


def test_defect2_every_occurrence_stays_under_its_call(home: Home) -> None:
    """Five gits in one call (more than the three a finding used to keep): all five stay
    under that call with their evidence; the sixth, another call's, under its own."""
    run_session(home, "S-many", _many_gits)
    gits = [f for f in _relayed_findings(home, "S-many") if f.rule.id == "MCS101"]
    gits = [f for f in gits if f.evidence[0].data["command"] == "git"]
    by_group = {f.group.rsplit("tools/call ", 1)[-1].split(" ")[0]: f for f in gits}
    assert set(by_group) == {"shell", "git_version"}, [f.group for f in gits]
    assert by_group["shell"].count == 5 == len(by_group["shell"].evidence)
    assert by_group["git_version"].count == 1 == len(by_group["git_version"].evidence)


def test_defect2_evidence_option_prints_what_is_asked(home: Home) -> None:
    run_session(home, "S-ev", _many_gits)
    doc = _json(home, "--session", "S-ev")
    [shell] = [
        f
        for f in doc["findings"]
        if f["rule"] == "MCS101"
        and (f.get("call") or {}).get("name") == "shell"
        and f["evidence"][0]["command"] == "git"
    ]
    assert shell["count"] == 5 and len(shell["evidence"]) == 5  # JSON keeps all
    # a tool called `shell` explains any program (issue 27 defect 11); a [tools] entry
    # that lists only sh makes each git a finding with its evidence
    pol = home.root / "tools.toml"
    pol.write_text('[tools]\nshell = ["sh"]\n')
    text = _review_cli(home, "--session", "S-ev", "--evidence", "all", "--policy", str(pol)).stdout
    assert text.count("git --version") >= 5, text
    one = _review_cli(home, "--session", "S-ev", "--evidence", "1", "--policy", str(pol)).stdout
    assert "4 more" in one, one


# ---- defect 3: under --trace, one exec is one occurrence; the shim hop is no finding ----


@needs_trace
def test_defect3_traced_shim_exec_is_one_occurrence(home: Home) -> None:
    install(home, ["sh", "git"])
    res = run(home, ["sh", "-c", "git --version"], "--trace")
    assert res.returncode == 0, res.stderr
    sid = only_session(home)
    doc = _json(home, "--session", sid)
    shim_dir = str(home.loc.shim_dir)
    about_shims = [f for f in doc["findings"] if shim_dir in json.dumps(f["message"])]
    assert about_shims == []  # the hop through a shim is how mcpshim works, not a finding
    [line] = [f for f in doc["findings"] if f["rule"] == "MCS106"]
    assert line["count"] == 1, line  # the shim's record and the tracer's are one exec
    [git] = [f for f in doc["findings"] if f["rule"] == "MCS101" and "git" in f["message"]]
    assert git["count"] == 1, git


# ---- defect 5: executables compared by identity, not spelling ---------------------------


def test_defect5_starter_policy_agrees_with_install(lab: Lab, home: Home, tmp_path: Path) -> None:
    """`policy init`'s example pins /usr/bin/git; install pins whatever the trusted path
    gives (on a merged-/usr system /bin/git is the same file). Neither spelling is "not
    allowed"."""
    lab.install("git")
    lab.run(["git", "--version"], check=True)
    starter = subprocess.run(
        [*MCPSHIM, "policy", "init"], env=home.env, capture_output=True, text=True, check=True
    ).stdout
    example = starter.split("# [commands.git]\n", 1)[1].split("\n[commands]", 1)[0]
    pol_file = tmp_path / "policy.toml"
    pol_file.write_text("[commands.git]\n" + example.replace("# ", ""))
    pol = load_policy(pol_file)
    assert pol.commands["git"].targets == ("/usr/bin/git",)
    assert "MCS112" not in {f.rule.id for f in lab.review(pol)}
    from mcpshim.review.shapes import same_file

    # and a policy spelled the other way round, where /bin is /usr/bin
    if same_file("/bin/git", "/usr/bin/git"):
        other = parse_policy('[commands.git]\ntargets = ["/bin/git"]\n', Path("p.toml"))
        assert "MCS112" not in {f.rule.id for f in lab.review(other)}


def test_defect5_same_file_is_identity(tmp_path: Path) -> None:
    from mcpshim.review.shapes import same_file

    a = tmp_path / "a"
    a.write_text("x")
    (tmp_path / "link").symlink_to(tmp_path)
    os.link(a, tmp_path / "hard")
    assert same_file(str(a), str(tmp_path / "link" / "a"))  # through a linked directory
    assert same_file(str(a), str(tmp_path / "hard"))  # one inode, two names
    (tmp_path / "b").write_text("x")
    assert not same_file(str(a), str(tmp_path / "b"))  # equal bytes, another file


# ---- defect 6: noise ---------------------------------------------------------------------


def test_defect6_clone_from_a_local_path_is_not_network(lab: Lab, tmp_path: Path) -> None:
    lab.install("git")
    src = tmp_path / "src"
    src.mkdir()
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    lab.run(["git", "clone", "-q", str(src), str(tmp_path / "dst")], check=True)
    lab.run(["git", "fetch", "origin"], cwd=tmp_path / "dst")
    found = lab.review()
    unknown = [f.evidence[0].data for f in of(found, "MCS109")]
    assert [d["command"] for d in unknown] == ["git"]  # the fetch from "origin" only
    assert all("clone" not in f.message for f in of(found, "MCS109"))


@needs_trace
def test_defect6_git_helpers_are_git_own(home: Home) -> None:
    """git running its own helpers from its exec-path is not "outside the trusted dirs"."""
    exec_path = subprocess.run(
        ["git", "--exec-path"], capture_output=True, text=True, check=True
    ).stdout.strip()
    helper = os.path.join(exec_path, "git")
    if not os.path.exists(helper):
        pytest.skip(f"no {helper}")
    install(home, ["git", "sh"])
    # what git-remote-http does: run git from the exec-path, by absolute path
    res = run(home, ["sh", "-c", f"{helper} --version; git --version"], "--trace")
    assert res.returncode == 0, res.stderr
    doc = _json(home, "--session", only_session(home))
    about = [f for f in doc["findings"] if exec_path in f["message"]]
    assert not [f for f in about if f["rule"] in ("MCS119", "MCS120")], about
    assert not [f for f in about if f["rule"] == "MCS302" and f["severity"] != "info"], about


def test_defect6_ca_bundle_is_not_a_credential() -> None:
    assert not is_credential_name("AWS_CA_BUNDLE")
    assert not is_credential_name("AWS_REGION")
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        assert is_credential_name(name), name


async def _two_calls_in_temp(s: ClientSession) -> None:
    await s.call_tool("git_version", {})
    await anyio.sleep(0.05)
    await s.call_tool("shell", {"line": "git --version"})


def test_defect6_temp_cwd_said_once_per_session(home: Home, tmp_path: Path) -> None:
    """The server's cwd is in /tmp: one finding, not one per exec or per call."""
    run_session(home, "S-tmp", _two_calls_in_temp, cwd=tmp_path)
    temp = [f for f in _relayed_findings(home, "S-tmp") if f.rule.id == "MCS104"]
    assert len(temp) == 1 and temp[0].count >= 3, [(f.group, f.text) for f in temp]


def test_defect6_supervisor_is_named(home: Home) -> None:
    install(home, ["git"])
    assert run(home, ["sh", "-c", "git --version"]).returncode == 0
    sid = only_session(home)
    [start] = events(home, "session-start")
    out = subprocess.run(
        [*MCPSHIM, "tree", "--dir", str(home.loc.shim_dir), "--session", sid],
        env=home.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # The server (sh) may be too quick to sample: then it is the parent the log lacks.
    named = (
        f"{start['pid']} mcpshim run (supervisor of session {sid})",
        f"{start['child_pid']} sh -c 'git --version' (the command of session {sid}",
    )
    assert any(n in out for n in named), out
    assert "parent not in log" not in out
    doc = _json(home, "--session", sid)
    assert all("parent not in log" not in f["group"] for f in doc["findings"]), doc


# ---- defect 7: evidence pointers name the record they quote ------------------------------


def _record_at(home: Home, where: str) -> execlog.Record:
    [rec] = [r for r in home.records() if r.where == where]
    return rec


async def _outliving(s: ClientSession, pkg: Path) -> None:
    await s.call_tool("run_test", {"package_dir": str(pkg)})
    await anyio.sleep(0.4)
    await s.call_tool("echo", {"text": "later"})


def test_defect7_outlived_evidence_points_at_the_process(home: Home, tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    run_session(home, "S-out", lambda s: _outliving(s, pkg))
    att = attribute(home.records(), "S-out", anchors_for(home.loc))
    assert att is not None
    try:
        [gone] = [f for f in _relayed_findings(home, "S-out") if f.rule.id == "MCS501"]
    finally:
        kill_helpers(att)
    for ev in gone.evidence:
        rec = _record_at(home, ev.where)
        assert isinstance(rec, execlog.ExecRecord) or rec.kind in ("observed", "trace-exec")
        assert getattr(rec, "pid", None) or rec.data.get("pid") == ev.data["pid"]  # type: ignore[union-attr]
        assert str(ev.data["pid"]) in ev.text


def test_defect7_one_spelling_per_target(home: Home) -> None:
    """install pins the spelling /proc gives (merged /usr: /usr/bin/sleep, not /bin/sleep)."""
    install(home, ["sleep"])
    m = load_manifest(home.loc.shim_dir)
    assert m is not None
    target = m.shims["sleep"].target
    assert os.path.realpath(os.path.dirname(target)) == os.path.dirname(target), target


# ---- defect 8: the article's question, answered per tool call ----------------------------


def test_defect8_review_answers_per_call(home: Home, tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    run_session(home, "S-ask", lambda s: _outliving(s, pkg))
    att = attribute(home.records(), "S-ask", anchors_for(home.loc))
    assert att is not None
    try:
        text = _review_cli(home, "--session", "S-ask", "--fail-on", "high").stdout
        doc = _json(home, "--session", "S-ask")
    finally:
        kill_helpers(att)
    blocks = text.split("\n== ")
    [run_test] = [b for b in blocks if "tools/call run_test" in b.splitlines()[0]]
    [echo] = [b for b in blocks if "tools/call echo" in b.splitlines()[0]]
    assert "   ran: npm test --silent;" in run_test
    assert "   outlived the call: YES: MCS501" in run_test
    assert "   command from an editable file: YES: MCS107" in run_test
    # the test script lives under /tmp (pytest's tmp_path): a script in a temp dir is new
    assert "   new executable path: YES: MCS102" in run_test
    for q in ("new executable path", "reached the network", "command from an editable file"):
        assert f"   {q}: no" in echo
    assert "   ran: nothing" in echo and "   outlived the call: no" in echo
    # routine events: info, counted on one line per call, not a line (and evidence) each
    assert "[INFO]" not in text
    assert run_test.count("routine (info): ") == 1 and "MCS101" in run_test
    [call] = [c for c in doc["calls"] if c["name"] == "run_test"]
    assert call["outlived"] and call["editable"] and call["new"] and call["ran"]
    assert call["network"] == []


# ---- the attack chains' checks -----------------------------------------------------------


def test_shadowed_git_from_node_modules_bin(lab: Lab, home: Home, tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("node not installed")
    lab.install("git", "node")
    bin_dir = tmp_path / "proj" / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    shadow = bin_dir / "git"
    shadow.write_text("#!/usr/bin/env node\nconsole.log('git version 0 (not git)');\n")
    shadow.chmod(0o755)
    env = {**lab.env, "PATH": f"{bin_dir}:{lab.env['PATH']}"}
    subprocess.run(["git", "--version"], env=env, check=True, capture_output=True)
    lab.run(["git", "--version"], check=True)  # the real one, through its shim: no finding
    [f] = of(lab.review(), "MCS120")
    assert f.level.label == "high" and str(shadow) in f.message and f.count == 1


@pytest.mark.parametrize("traced", [False, True], ids=["sampled", "traced"])
def test_loopback_service_outside_the_family_is_outbound(
    home: Home, tmp_path: Path, traced: bool
) -> None:
    """A local service outside the family is a network peer: sampled, MCS304 (medium);
    traced, the kernel's connect is MCS306, graded by the policy (loopback: low by
    default, what [network] loopback says otherwise)."""
    import socket

    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    code = f"import socket,time;s=socket.create_connection(('127.0.0.1',{port}));time.sleep(1.2)"
    try:
        opts = () if traced else ("--no-trace",)
        assert run(home, [sys.executable, "-c", code], *opts).returncode == 0
    finally:
        srv.close()
    sid = only_session(home)
    doc = _json(home, "--session", sid)
    [out] = [f for f in doc["findings"] if f["rule"] == ("MCS306" if traced else "MCS304")]
    assert f"127.0.0.1:{port}" in out["message"]
    assert out["severity"] == ("low" if traced else "medium")
    if traced:
        assert not [f for f in doc["findings"] if f["rule"] == "MCS304"]
        policy = tmp_path / "p.toml"
        policy.write_text('[network]\nloopback = "medium"\n')
        graded = _json(home, "--session", sid, "--policy", str(policy))
        [out] = [f for f in graded["findings"] if f["rule"] == "MCS306"]
        assert out["severity"] == "medium"


def test_tool_name_hint_is_low_policy_entry_is_medium(home: Home) -> None:
    run_session(home, "S-hint", _two_calls_in_temp)
    att = attribute(home.records(), "S-hint", anchors_for(home.loc))
    assert att is not None
    from mcpshim.review.rules.mcp_rules import session_findings

    # "shell" runs any command (its name and description say so): git is what it said it
    # does (issue 27 defect 11), so no hint
    assert [f for f in session_findings(att, default_policy()) if f.rule.id == "MCS502"] == []
    declared = parse_policy('[tools]\nshell = ["sh"]\n', Path("p.toml"))
    [broken] = [f for f in session_findings(att, declared) if f.rule.id == "MCS502"]
    assert broken.level.label == "medium"  # the policy said what shell may run


def test_observed_record_says_when_it_was_seen(home: Home) -> None:
    """A sampled record's time is when the sampler saw the process, not when it decided no
    shim had (a tick later): a process that ended inside its call never "outlived" it."""
    from mcpshim.supervise.sampler import Sampler

    emitted: list[tuple[str, dict[str, Any]]] = []
    child = subprocess.Popen(["sleep", "5"])
    try:
        sampler = Sampler(
            "S", execlog.current_boot_id(), os.getpid(), lambda k, p: emitted.append((k, p)), None
        )
        sampler.tick()
        seen_by = time.time()
        time.sleep(0.3)
        sampler.tick()
    finally:
        child.kill()
        child.wait()
    [obs] = [p for k, p in emitted if k == "observed" and p["pid"] == child.pid]
    t = parse_time(obs["time"])
    assert t is not None and t.timestamp() <= seen_by, (obs["time"], seen_by)


def test_a_shimmed_exec_seen_before_its_record_is_read_is_not_observed() -> None:
    """The sampler saw a process exec before the log's tail had its shim's record (written
    before that exec): it waits a tick rather than report the target as unshimmed."""
    from mcpshim.proc.procinfo import start_ticks
    from mcpshim.supervise.sampler import Sampler

    emitted: list[tuple[str, dict[str, Any]]] = []
    child = subprocess.Popen(["sh", "-c", "sleep 0.4; exec sleep 5"])
    boot = execlog.current_boot_id()
    try:
        sampler = Sampler("S", boot, os.getpid(), lambda k, p: emitted.append((k, p)), None)
        sampler.tick()  # sh, pending
        time.sleep(0.15)
        sampler.tick()  # sh decided: observed (it is unshimmed)
        deadline = time.time() + 5
        while b"sleep" not in Path(f"/proc/{child.pid}/cmdline").read_bytes().split(b"\0")[0]:
            assert time.time() < deadline
            time.sleep(0.02)
        sampler.tick()  # the exec of sleep, its shim's record not read yet
        start = start_ticks(child.pid)
        shim_record = execlog.ExecRecord(
            None, None, boot, child.pid, os.getpid(), start, None, b"/", "sleep",
            b"/usr/bin/sleep", b"/shims/sleep", "S", b"", (), (b"5",),
        )  # fmt: skip
        sampler.note_shim_records([shim_record])
        time.sleep(0.15)
        sampler.tick()
    finally:
        child.kill()
        child.wait()
    mine = [
        os.path.basename(p["exe"]) for k, p in emitted if k == "observed" and p["pid"] == child.pid
    ]
    assert mine == ["dash"] or mine == ["sh"] or mine == ["bash"], emitted  # sh only, not sleep


def test_a_fork_seen_only_before_its_exec_is_not_its_parent_again() -> None:
    """A shell's pipeline child sampled between its fork and its exec has the shell's exe
    and command line; gone by the next tick, it was reported as a second `sh -c` started
    by absolute path. It ran nothing its parent's record does not show."""
    from mcpshim.supervise.sampler import Sampler

    code = "import os,time\nif os.fork() == 0:\n    time.sleep(0.3); os._exit(0)\ntime.sleep(5)"
    emitted: list[tuple[str, dict[str, Any]]] = []
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.1)
        sampler = Sampler(
            "S", execlog.current_boot_id(), os.getpid(), lambda k, p: emitted.append((k, p)), None
        )
        sampler.tick()  # the parent and its fork, both python -c CODE
        time.sleep(0.5)
        sampler.tick()  # the fork is gone
    finally:
        parent.kill()
        parent.wait()
    pids = [p["pid"] for k, p in emitted if k == "observed"]
    assert pids == [parent.pid], emitted
