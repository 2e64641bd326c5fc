"""Coverage you can state (issue 21): execs that escaped their shims are found and explained.

A server that runs its commands through a login shell started by absolute path, as
@wonderwhy-er/desktop-commander does (`[$SHELL, '-l', '-c', command]`): the shell's profile
sets PATH from scratch (Debian's /etc/profile does; here a throwaway HOME's ~/.bash_profile
and ~/.zprofile do it the same way, the machine's /etc untouched), so the shim directory is
gone from PATH. Under the default `mcpshim run --mcp` (traced) every git is on record under
its call, the bypass is a finding with its cause, zsh keeps the shims first through the
ZDOTDIR route, and the coverage line counts it all.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpshim.proc.procinfo import start_ticks
from mcpshim.trace.probe import trace_unavailable
from tests.fixtures.home import FIXTURES, Home, install
from tests.fixtures.mcpscenario import attribution_of
from tests.fixtures.runhelp import MCPSHIM, events, only_session, poll, run
from tests.fixtures.seccomp import DENY_PTRACE_PRELUDE

FIX = FIXTURES
LOGIN_SERVER = FIX / "mcp_login_server.py"
MCPSHIM_BIN = Path(sys.executable).parent / "mcpshim"
BASH = shutil.which("bash")
ZSH = shutil.which("zsh")
TRACEABLE = sys.platform.startswith("linux") and trace_unavailable(None)[0] is not None
needs_trace = pytest.mark.skipif(not TRACEABLE, reason="needs Linux with strace allowed")
RESET = "PATH=/usr/local/bin:/usr/bin:/bin\nexport PATH\n"  # what Debian's /etc/profile does
SECRET = "tok-a1b2c3d4e5f6-not-for-disk"


def hexed(text: str) -> bytes:
    return b"".join(b"\\x%02x" % c for c in text.encode())


def login_home(home: Home) -> None:
    """Profiles that reset PATH, as /etc/profile and macOS's path_helper do."""
    (home.root / ".bash_profile").write_text(RESET)
    (home.root / ".zprofile").write_text(RESET)


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for argv in (["git", "init", "-q"], [*git, "commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run(argv, cwd=repo, env=env, check=True)
    return repo


def mcpshim(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPSHIM, *args], env=home.env, capture_output=True, text=True, timeout=120, check=False
    )


def drive(home: Home, repo: Path, env: dict[str, str], *extra: str) -> list[str]:
    assert BASH is not None and ZSH is not None
    server = [sys.executable, str(LOGIN_SERVER)]
    params = StdioServerParameters(
        command=str(MCPSHIM_BIN),
        args=["run", "--dir", str(home.loc.shim_dir), "--mcp", *extra, "--", *server],
        env=env,
        cwd=str(repo),
    )

    async def go() -> list[str]:
        out = []
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            for shell, line in ((BASH, "git status; (sleep 30 &)"), (ZSH, "git log -1")):
                r = await s.call_tool("run_command", {"shell": shell, "command": line})
                assert not r.is_error, r
                out.append(r.content[0].text)  # type: ignore[union-attr]
                await anyio.sleep(0.3)  # an agent thinks between calls (starts are 10 ms ticks)
        return out

    return anyio.run(go)


def kill_sleeps(home: Home, sid: str) -> None:
    for s in events(home, "survivor", sid):
        if s.get("cmdline", [""])[0] == "sleep" and start_ticks(s["pid"]) == s["start"]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(s["pid"], signal.SIGKILL)


def no_secret_under(*roots: Path) -> None:
    for root in roots:
        for p in root.rglob("*"):
            if p.is_file() and not p.is_symlink():
                data = p.read_bytes()
                assert SECRET.encode() not in data and hexed(SECRET[:12]) not in data, p


@needs_trace
@pytest.mark.skipif(BASH is None or ZSH is None, reason="needs bash and zsh")
def test_login_shells_under_the_default_run_mcp(home: Home, tmp_path: Path) -> None:
    install(home, ["git", "sh", "sleep"])
    login_home(home)
    repo = make_repo(tmp_path)
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    env = {**home.env, "MCPSHIM_TEST_TOKEN": SECRET, "TMPDIR": str(tmp)}
    out = drive(home, repo, env)
    assert "On branch" in out[0] or "No commits" in out[0], out
    assert "one" in out[1], out
    poll(lambda: events(home, "session-end"), "session-end")
    sid = only_session(home)
    try:
        # Both gits are on record, each under its call.
        att = attribution_of(home, sid)
        [bash_call, zsh_call] = att.calls
        gits = {
            tuple(i.args): att.owner.get(n.id)
            for n in att.nodes()
            for i in n.images
            if i.command == "git" and i.source in ("trace", "shim")
        }
        assert gits[(b"status",)] == bash_call.index
        assert gits[(b"log", b"-1")] == zsh_call.index
        # bash: the profile took the shim dir off PATH; the trace has the PATH git received.
        [status] = [r for r in events(home, "trace-exec", sid) if r["argv"] == ["git", "status"]]
        assert status["path"] == "/usr/local/bin:/usr/bin:/bin" and "via_shim" not in status
        # zsh: the ZDOTDIR route put the shims back in front: its git went through the shim.
        [logged] = [r for r in home.execs() if r.session == sid and r.args == (b"log", b"-1")]
        assert logged.shim == "git"
        # The bypass is a finding, with its cause, under the bash call.
        review = json.loads(mcpshim(home, "review", "--session", sid, "--format", "json").stdout)
        found = [f for f in review["findings"] if f["rule"] == "MCS405"]
        [git] = [f for f in found if f["evidence"][0]["command"] == "git"]
        assert git["severity"] == "medium"  # git is sensitive
        assert (
            "run_command" in git["group"]
            and bash_call.request.strftime("%H:%M:%S") in (git["group"])
        )
        assert "its PATH did not hold the shim dir" in git["message"]
        assert "bash login shell" in git["message"] and "/etc/profile" in git["message"]
        [ev] = git["evidence"]
        assert ev["cause"] == "path-without-shim-dir" and ev["pid"] == status["pid"]
        assert ev["changer_pid"] == status["ppid"]  # the login shell that ran it
        [sleep] = [f for f in found if f["evidence"][0]["command"] == "sleep"]
        assert sleep["severity"] == "low"
        # Traced: what the sampler saw is no evidence of its own (no MCS302 "seen only by
        # sampling"), though it saw the sleep.
        assert [s for s in events(home, "observed", sid) if s["cmdline"] == ["sleep", "30"]]
        assert not [f for f in review["findings"] if f["rule"] == "MCS302"]
        # The coverage line counts it: in the text header, JSON and SARIF.
        [cov] = review["coverage"]
        assert cov["session"] == sid
        assert cov["commands"]["git"] == {"through_shim": 1, "bypassed": 1}
        assert cov["commands"]["sleep"] == {"through_shim": 0, "bypassed": 1}
        assert cov["bypass_causes"] == {"path-without-shim-dir": 2}
        assert cov["execs"] == cov["through_shims"] + cov["bypassed"] + cov["no_shim"]
        assert cov["trace"]["status"] in ("incomplete", "complete")  # the sleep survives
        text = mcpshim(home, "review", "--session", sid).stdout
        line = next(ln for ln in text.splitlines() if ln.startswith("coverage: "))
        assert f"{cov['execs']} execs: 1 through shims, 2 bypassed (2 with the shim dir " in line
        assert line == "coverage: " + cov["line"]
        sarif = json.loads(mcpshim(home, "review", "--session", sid, "--format", "sarif").stdout)
        assert sarif["runs"][0]["properties"]["coverage"] == review["coverage"]
        tree = mcpshim(home, "tree", "--session", sid).stdout
        assert line in tree.splitlines()
        md = mcpshim(home, "report", "--session", sid, "--format", "md", "-o", "-").stdout
        assert cov["line"] in md
    finally:
        kill_sleeps(home, sid)
    # Only PATH of the environment was ever kept: nothing else reached a file.
    poll(lambda: not any(_drains(sid)), "the drain process to end")  # with the sleep's tracer
    no_secret_under(home.loc.log_dir, tmp)


def _open_gate(gate: Path, within: float = 10.0) -> None:
    """Write a line into the FIFO the helper reads, once it has opened it (ENXIO: not yet)."""
    end = time.monotonic() + within
    while True:
        try:
            fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            if time.monotonic() > end:
                return
            time.sleep(0.05)
            continue
        os.write(fd, b"go\n")
        os.close(fd)
        return


def _drains(session: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{name}/cmdline").read_bytes()
            if b"mcpshim.trace.drain" in cmd and session.encode() in cmd:
                found.append(int(name))
    return found


@needs_trace
def test_survivors_later_execs_are_drained_with_path_only(home: Home, tmp_path: Path) -> None:
    # The session ends while a helper still runs (--on-exit report): its tracer stays, and a
    # drain process takes the FIFO over; what the helper runs later is recorded once it is
    # gone (late), its environment cut down to PATH. The helper waits on a FIFO this test
    # opens only once the session has ended, so it outlives the session on any machine.
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    line = f"sh -c 'read x < {gate}; env -i /bin/true; /bin/true' & exit 0"
    env = {**home.env, "MCPSHIM_TEST_TOKEN": SECRET}
    try:
        proc = run(home, ["/bin/sh", "-c", line], stdout=subprocess.DEVNULL, env=env)
        assert proc.returncode == 0
        sid = only_session(home)
        [summary] = events(home, "trace-summary", sid)
        assert summary["complete"] is False  # a survivor kept its tracer: not complete
    finally:  # let the helper go on (whatever happened: it must not wait for good)
        _open_gate(gate)
    poll(lambda: not _drains(sid), "the drain process to end", deadline=30)
    late = [e for e in events(home, "trace-exec", sid) if e.get("late")]
    trues = [e for e in late if e["filename"] == "/bin/true"]
    assert len(trues) == 2
    assert [e for e in trues if "path" in e and e["path"] is None]  # env -i: no PATH at all
    assert any(str(e.get("path") or "").startswith("/") for e in trues)  # PATH kept
    no_secret_under(home.loc.log_dir)
    assert list((home.loc.log_dir / "trace").iterdir()) == []


@needs_trace
@pytest.mark.skipif(ZSH is None, reason="needs zsh")
def test_zsh_route_off_the_bypass_says_so(home: Home) -> None:
    install(home, ["git"])
    login_home(home)
    proc = run(home, [str(ZSH), "-l", "-c", "git --version"], "--no-zdotdir", capture_output=True)
    assert proc.returncode == 0, proc.stderr
    sid = only_session(home)
    assert [r for r in home.execs() if r.session == sid] == []  # missed the shim
    review = json.loads(mcpshim(home, "review", "--session", sid, "--format", "json").stdout)
    [f] = [f for f in review["findings"] if f["rule"] == "MCS405"]
    assert "zsh login shell reset PATH" in f["message"] and "--no-zdotdir" in f["message"]
    [start] = events(home, "session-start", sid)
    assert "zdotdir" not in start and start["trace"] == "strace"


@pytest.mark.skipif(ZSH is None, reason="needs zsh")
def test_zsh_route_keeps_the_shims_first(home: Home, tmp_path: Path) -> None:
    # Untraced too: the route is the shim's own way back, not the trace's.
    install(home, ["git"])
    login_home(home)
    user = tmp_path / "zdot"
    user.mkdir()
    (user / ".zprofile").write_text(RESET)  # the user's own ZDOTDIR, read by the route
    (user / ".zlogin").write_text("echo user-zlogin=$ZDOTDIR\n")
    env = {**home.env, "ZDOTDIR": str(user)}
    line = "git --version; echo PATH=$PATH; echo ZDOTDIR=$ZDOTDIR"
    proc = run(home, [str(ZSH), "-l", "-c", line], "--no-trace", capture_output=True, env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert f"user-zlogin={user}" in out  # the user's file ran, with the user's ZDOTDIR
    assert f"PATH={home.loc.shim_dir}:/usr/local/bin:/usr/bin:/bin" in out
    sid = only_session(home)
    [git] = [r for r in home.execs() if r.session == sid]
    assert git.args == (b"--version",)
    [start] = events(home, "session-start", sid)
    assert start["zdotdir"] == str(home.loc.shim_dir / ".zsh") and start["trace"] == "off"
    assert "trace: off (--no-trace)" in mcpshim(home, "review", "--session", sid).stdout


@needs_trace
def test_git_running_itself_is_info(home: Home, tmp_path: Path) -> None:
    # git puts its exec-path (/usr/lib/git-core) first on the PATH of what it runs: the git
    # of a shell alias is git's own, not a shadow of the shim (main's MCS302 said so of
    # sampled ones; MCS405 carries it now that shimmed commands are its business).
    install(home, ["git"])
    repo = make_repo(tmp_path)
    exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True,
                               check=True).stdout.strip()  # fmt: skip
    line = "git -c alias.v='!git --version' v"
    proc = run(home, ["/bin/sh", "-c", line], capture_output=True, cwd=repo)
    assert proc.returncode == 0 and b"git version" in proc.stdout, proc.stderr
    sid = only_session(home)
    review = json.loads(mcpshim(home, "review", "--session", sid, "--format", "json").stdout)
    [f] = [f for f in review["findings"] if f["rule"] == "MCS405"]
    assert f["severity"] == "info"
    assert f["message"] == f"git ran from git's own helpers ({exec_path}/git): git running itself"
    [ev] = f["evidence"]
    assert ev["cause"] == "shim-dir-not-first" and ev["path"] == f"{exec_path}/git"


@needs_trace
def test_tree_and_review_count_every_installed_shim_dir_alike(home: Home, tmp_path: Path) -> None:
    # git's shim lives in a second shim directory (main's registry: review knows every one
    # mcpshim installed, without --dir); tree's coverage line must say what review's says.
    other = tmp_path / "other-shims"
    assert mcpshim(home, "install", "--dir", str(other), "git").returncode == 0
    line = "/usr/bin/git --version"
    proc = run(home, ["/bin/sh", "-c", line], "--dir", str(other), stdout=subprocess.DEVNULL)
    assert proc.returncode == 0
    sid = only_session(home)
    review = json.loads(mcpshim(home, "review", "--session", sid, "--format", "json").stdout)
    [cov] = review["coverage"]
    assert cov["commands"]["git"] == {"through_shim": 0, "bypassed": 1}
    tree = mcpshim(home, "tree", "--session", sid).stdout
    assert "coverage: " + cov["line"] in tree.splitlines()


@needs_trace
def test_run_traces_by_default_and_no_trace_opts_out(home: Home) -> None:
    install(home, ["git"])
    assert run(home, ["/bin/sh", "-c", "git --version; /usr/bin/env true"]).returncode == 0
    sid = only_session(home)
    assert [r["argv"][0] for r in events(home, "trace-exec", sid)][-1] == "true"
    text = mcpshim(home, "review", "--session", sid).stdout
    assert "1 through shims" in text and "trace: complete" in text
    assert run(home, ["/bin/true"], "--no-trace").returncode == 0
    assert len(events(home, "trace-summary")) == 1
    both = run(home, ["/bin/true"], "--trace", "--no-trace", capture_output=True)
    assert both.returncode == 2 and b"contradict" in both.stderr


@needs_trace
@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="syscall numbers")
def test_denied_ptrace_falls_back_and_the_line_says_so(home: Home) -> None:
    deny = DENY_PTRACE_PRELUDE + "os.execv(sys.argv[1], sys.argv[1:])"
    argv = [sys.executable, "-c", deny, *MCPSHIM, "run", "--dir", str(home.loc.shim_dir)]
    argv += ["--", "/bin/true"]
    proc = subprocess.run(argv, env=home.env, capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert b"not tracing" in proc.stderr
    sid = only_session(home)
    [start] = events(home, "session-start", sid)
    assert start["trace"] == "unavailable"
    text = mcpshim(home, "review", "--session", sid).stdout
    assert "trace: unavailable (strace cannot trace a child process here" in text
    assert "shims and sampling only" in text


def test_no_session_no_line(home: Home) -> None:
    install(home, ["git"])  # a log with shim records but no `mcpshim run` session
    subprocess.run(
        ["git", "--version"],
        env={**home.env, "PATH": f"{home.loc.shim_dir}:/usr/bin:/bin"},
        capture_output=True,
        check=True,
    )
    out = mcpshim(home, "review", "--format", "json")
    assert json.loads(out.stdout)["coverage"] == []
    assert "coverage" not in mcpshim(home, "review").stdout


@needs_trace
def test_each_cause_from_evidence(home: Home) -> None:
    install(home, ["git", "sh"])  # the shells go through their shim: ancestors all the same
    line = (
        "env -i /usr/bin/git --version; env -i git --version; "
        "sh -c 'PATH=/usr/bin:/bin git --version'; env PATH=/usr/bin:$PATH git --version; "
        "git --version"
    )
    assert run(home, ["sh", "-c", line], stdout=subprocess.DEVNULL).returncode == 0
    sid = only_session(home)
    review = json.loads(mcpshim(home, "review", "--session", sid, "--format", "json").stdout)
    causes = {
        ev["cause"]: f["message"]
        for f in review["findings"]
        if f["rule"] == "MCS405"
        for ev in f["evidence"]
    }
    assert (
        causes["absolute-path"]
        == "git ran without its shim: called by absolute path (/usr/bin/git)"
    )
    assert "received no PATH at all; env -i gave it an empty environment" in causes["no-path"]
    # The inner sh (through its shim) is the one whose line set PATH: named, with its pid.
    [git] = [r for r in events(home, "trace-exec", sid) if r.get("path") == "/usr/bin:/bin"]
    inner = [r for r in events(home, "trace-exec", sid) if r.get("via_shim") == "sh"][-1]
    assert git["ppid"] == inner["pid"] or git["pid"] == inner["pid"]
    assert causes["path-without-shim-dir"].endswith(
        "its PATH did not hold the shim dir; a PATH assignment in a shell's command line "
        f"(pid {inner['pid']}: {inner['argv'][0]} -c 'PATH=/usr/bin:/bin git --version')"
    )
    assert (
        "PATH had /usr/bin before the shim dir; env set its PATH" in (causes["shim-dir-not-first"])
    )
    [cov] = review["coverage"]
    assert cov["commands"]["git"] == {"through_shim": 1, "bypassed": 4}
    assert cov["bypass_causes"] == {
        "absolute-path": 1,
        "no-path": 1,
        "path-without-shim-dir": 1,
        "shim-dir-not-first": 1,
    }


def test_untraced_a_sampled_shell_counts_as_the_command_it_ran_as(home: Home) -> None:
    # The sampler reads a process's exe resolved: /bin/sh is /usr/bin/dash on Debian. The
    # shell lives long enough to be sampled; it is an sh that bypassed sh's shim (it was
    # counted as dash, a command with no shim, whenever sampling caught it).
    install(home, ["git", "sh"])
    line = '/bin/sh -c "git --version; sleep 0.5"'
    proc = run(home, ["sh", "-c", line], "--no-trace", "--sample-ms", "20",
               stdout=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0
    sid = only_session(home)
    sampled = [o for o in events(home, "observed", sid) if o["cmdline"][:1] == ["/bin/sh"]]
    assert sampled, "the sampler did not catch the shell"
    review = json.loads(mcpshim(home, "review", "--session", sid, "--format", "json").stdout)
    [cov] = review["coverage"]
    assert cov["commands"]["sh"] == {"through_shim": 1, "bypassed": 1}
    # its parent, the outer sh, went through sh's shim to /usr/bin/sh: the shell ran its own
    # program again by absolute path, as a traced run of the same line says (untraced, the
    # sample names its parent's program: parent_exe, from the outer shell's own sample)
    assert any(o.get("parent_exe") == os.path.realpath("/bin/sh") for o in sampled), sampled
    assert cov["bypass_causes"] == {"itself": 1}
    # one statement about the one shell: its line, and that it ran by absolute path past
    # its shim (issue 27: no second finding, MCS405, beside it)
    assert not [f for f in review["findings"] if f["rule"] == "MCS405"]
    [f] = [f for f in review["findings"] if f["rule"] == "MCS105"]
    assert f["message"].startswith("sh (started by absolute path, past any shim) -c runs")
    assert f["evidence"][0]["source"] == "observed"


def test_untraced_a_shell_by_absolute_path_is_counted_from_parent_evidence(home: Home) -> None:
    # No trace: the shell started by absolute path is known only from the command line its
    # first shimmed child kept (parent evidence), and the sampler if it caught it.
    install(home, ["git", "sh"])
    line = '/bin/sh -c "git --version; true"'
    proc = run(home, ["sh", "-c", line], "--no-trace", stdout=subprocess.DEVNULL)
    assert proc.returncode == 0
    sid = only_session(home)
    review = json.loads(mcpshim(home, "review", "--session", sid, "--format", "json").stdout)
    [cov] = review["coverage"]
    assert cov["commands"] == {
        "git": {"through_shim": 1, "bypassed": 0},
        "sh": {"through_shim": 1, "bypassed": 1},
    }
    # the shell's exec: from its child's parent evidence, or from the sampler when it
    # caught the shell (then the parent evidence repeats it)
    assert cov["bypass_causes"] == {"absolute-path": 1}
    assert cov["sources"]["parent"] + cov["sources"]["sampler"] == 1, cov["sources"]
    assert cov["trace"]["status"] == "off"
    # one statement about the shell: its line when the sampler caught it (MCS105), else
    # the bypass its child's record shows (MCS405); a composed line the server wrote and a
    # shell past its shim are both low (docs/verdicts.md: each program is on record)
    said = [f for f in review["findings"] if f["rule"] in ("MCS105", "MCS405")]
    [f] = [f for f in said if f["evidence"][0]["source"] in ("parent", "observed")]
    assert f["severity"] == "low"
