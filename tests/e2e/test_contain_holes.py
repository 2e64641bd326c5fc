"""What `run --mcp --lock L --contain` did not hold (issue 39), each tried through the SDK's
client driving a real SDK server under the real `mcpshim run`: every executable the ruleset
allows is named and chosen (an exec of /proc/self/exe is approved and allowed as the file
it named in the process that made it, never as mcpshim's own interpreter; the shims bring
no shell the lock did not approve); every protocol the start line claims (MPTCP to a port
the lock does not list is refused; a Unix socket among the lock's destinations leaves the
TCP rules on); metadata changes outside the write directories are facts; and an escape
past the path rules has one severity in every view."""

from __future__ import annotations

import json
import os
import shutil
import site
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpshim.contract.lockfile import load_lock
from mcpshim.shim.manifest import load_manifest
from tests.e2e.test_contain import _call, _calls
from tests.fixtures.approvescenario import run_mcp
from tests.fixtures.home import FIXTURES, Home, install
from tests.fixtures.landlockhelp import ABI, LOADER, needs_landlock
from tests.fixtures.nativekit import need_cc
from tests.fixtures.otelscenario import traces_of
from tests.fixtures.runhelp import command as mcpshim
from tests.fixtures.runhelp import events, needs_trace

SERVER = [sys.executable, str(FIXTURES / "mcp_contain_server.py")]
pytestmark = [needs_landlock, needs_trace]
#: mcpshim's own interpreter, which /proc/self/exe names in mcpshim's process
OURS = os.path.realpath(sys.executable)
#: another Python for the server, so that the lock approving the server's program does not
#: approve ours (the SDK from our site-packages, through PYTHONPATH)
OTHER_PYTHON = "/usr/bin/python3.11"
SELF_EXEC = r"""
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "fork") == 0) {  /* a zygote's child: never exec'd */
        pid_t pid = fork();
        if (pid == 0) {
            char *forked[] = { "selfexec", "forked", NULL };
            execv("/proc/self/exe", forked);
            _exit(127);
        }
        int st;
        waitpid(pid, &st, 0);
        return WEXITSTATUS(st);
    }
    if (argc > 1) { puts(argv[1]); return 0; }   /* the second run: say so */
    char *again[] = { "selfexec", "again", NULL };
    execv("/proc/self/exe", again);               /* what Chromium's services do */
    perror("execv");
    return 127;
}
"""


def _self_exec(tmp_path: Path) -> str:
    cc = need_cc()
    src, prog = tmp_path / "selfexec.c", tmp_path / "tools" / "selfexec"
    src.write_text(SELF_EXEC)
    prog.parent.mkdir()
    subprocess.run([*cc, "-O", "-o", str(prog), str(src)], check=True, timeout=120)
    return os.path.realpath(prog)


@pytest.mark.skipif(
    not os.path.isfile(OTHER_PYTHON) or os.path.samefile(OTHER_PYTHON, OURS),
    reason=f"needs a Python other than mcpshim's ({OURS}) at {OTHER_PYTHON}",
)
def test_proc_self_exe_is_approved_and_allowed_as_the_file_it_named(
    home: Home, tmp_path: Path
) -> None:
    prog = _self_exec(tmp_path)
    server = [OTHER_PYTHON, str(FIXTURES / "mcp_contain_server.py")]
    env = {"PYTHONPATH": site.getsitepackages()[0]}
    runs = _calls(_call("run", argv=[prog]), _call("run", argv=[prog, "fork"]))
    sid, out = run_mcp(home, server, runs, "--name", "selfexe", env=env)
    assert out == ["status 0: again", "status 0: forked"]
    # its own previous image, and a forked child's parent's image
    links = [e for e in events(home, "trace-exec", sid) if e["filename"] == "/proc/self/exe"]
    assert [(e["resolved"], e["result"]) for e in links] == [(prog, "ok"), (prog, "ok")]
    lock = tmp_path / "mcpshim.lock"
    done = mcpshim(home, "approve", "--session", sid, "--lock", str(lock), "--yes")
    assert done.returncode == 0, done.stderr
    assert "/proc/self/exe" not in done.stdout and prog in done.stdout  # the card names it
    approval = load_lock(lock).servers["selfexe"]
    paths = {e.path for b in (approval.startup, approval.tools["run"].boundary)
             for e in b.executables}  # fmt: skip
    assert prog in paths and "/proc/self/exe" not in paths and OURS not in paths

    sid, out = run_mcp(home, server, _calls(
        _call("run", argv=[prog]),
        _call("run", argv=[OURS, "-c", "print(42)"]),
        _call("run", argv=[prog, "fork"]),
    ), "--name", "selfexe", "--lock", str(lock), "--contain", env=env)  # fmt: skip
    assert out == ["status 0: again", "error: Permission denied", "status 0: forked"]
    [start] = events(home, "session-start", sid)
    allowed = {a["path"]: a["why"] for a in start["contain"]["execute"]}
    assert allowed[prog] == "approved" and OURS not in allowed
    assert not any(p.startswith("/proc/") for p in allowed)
    links = [e for e in events(home, "trace-exec", sid) if e["filename"] == "/proc/self/exe"]
    assert [(e["resolved"], "blocked" in e) for e in links] == [(prog, False), (prog, False)]
    # every reader names the file: the tree, and review's account of the calls
    tree = mcpshim(home, "tree", "--session", sid, "--format", "json").stdout
    assert "/proc/self/exe" not in tree
    images = [i for i in _images(json.loads(tree)["roots"]) if i["argv"] == ["selfexec", "again"]]
    assert [i["target"] for i in images] == [prog]
    text = mcpshim(home, "review", "--session", sid).stdout
    assert "/proc/self/exe" not in text
    blocked = text.split("tools/call run (id 4)")[1]
    assert f"blocked by the lock: exec of {OURS} refused (EACCES)" in blocked


def _images(nodes: list[dict[str, object]]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for n in nodes:
        out += n["images"]  # type: ignore[arg-type]
        out += _images(n["children"])  # type: ignore[arg-type]
    return out


def test_the_shims_make_no_shell_executable_the_lock_did_not_approve(
    home: Home, tmp_path: Path
) -> None:
    """The sh shims' #! interpreter was in every execute set, so `sh -c` and `dash -c` ran
    in every contained family. Where a compiler can build native shims they are built at
    start and no shell is executable; where none can, the start line says why one is."""
    need_cc()
    install(home, ["git"])  # an sh shim: #!/usr/bin/dash (or the system's sh)
    manifest = load_manifest(home.loc.shim_dir)
    assert manifest is not None and manifest.shims["git"].kind == "sh"
    shell = manifest.interpreter
    sid, out = run_mcp(home, SERVER, _calls(_call("run", argv=["git", "--version"])),
                       "--name", "noshell")  # fmt: skip
    lock = tmp_path / "mcpshim.lock"
    done = mcpshim(home, "approve", "--session", sid, "--lock", str(lock), "--yes")
    assert done.returncode == 0, done.stderr
    tries = _calls(
        _call("run", argv=["git", "--version"]),
        _call("run", argv=["sh", "-c", "echo hi"]),
        _call("run", argv=[shell, "-c", "echo hi"]),
    )
    contain = ("--name", "noshell", "--lock", str(lock), "--contain")

    # no compiler: the sh shims stay, and so does their shell, said at start
    sid, out = run_mcp(home, SERVER, tries, *contain, env={"CC": "/nonexistent/cc"})
    assert out[0].startswith("status 0: git version") and out[1] == out[2] == "status 0: hi"
    [start] = events(home, "session-start", sid)
    allowed = {a["path"]: a["why"] for a in start["contain"]["execute"]}
    assert allowed[shell] == "sh is executable because the shims need it"
    assert any("sh is executable because the shims need it" in n
               for n in start["contain"]["notes"])  # fmt: skip

    # a compiler: native shims are built at start, and no shell runs
    sid, out = run_mcp(home, SERVER, tries, *contain)
    assert out[0].startswith("status 0: git version")  # through the native shim
    assert out[1] == out[2] == "error: Permission denied"
    manifest = load_manifest(home.loc.shim_dir)
    assert manifest is not None and manifest.shims["git"].kind == "native"
    [start] = events(home, "session-start", sid)
    allowed = {a["path"]: a["why"] for a in start["contain"]["execute"]}
    assert shell not in allowed and os.path.realpath("/bin/sh") not in allowed
    git_shim = str(home.loc.shim_dir / "git")
    assert allowed[git_shim] == "shim git, native, needs no interpreter"
    notes = start["contain"]["notes"]
    assert any(n.startswith("built native shims for git") for n in notes)
    assert any("sh fallback cannot run" in n for n in notes)
    blocked = {e["filename"] for e in events(home, "trace-exec", sid) if e.get("blocked")}
    assert shell in blocked and "/usr/bin/sh" in blocked  # refused: review says blocked


def test_metadata_changes_outside_the_write_dirs_are_facts(home: Home, tmp_path: Path) -> None:
    """Landlock does not refuse chmod or utime outside --contain-write: the changes happen,
    and a contained session with write rules records each as a fact under its call."""
    ws, outside = tmp_path / "ws", tmp_path / "outside.sh"
    ws.mkdir()
    (ws / "inside").write_text("x")
    outside.write_text("#!/bin/sh\n")
    outside.chmod(0o644)
    sid, _ = run_mcp(home, SERVER, _calls(_call("metadata", path=str(ws / "inside"), mode=0o600)),
                     "--name", "meta")  # fmt: skip
    lock = tmp_path / "mcpshim.lock"
    done = mcpshim(home, "approve", "--session", sid, "--lock", str(lock), "--yes")
    assert done.returncode == 0, done.stderr
    sid, out = run_mcp(home, SERVER, _calls(
        _call("metadata", path=str(ws / "inside"), mode=0o640, mtime=1),
        _call("metadata", path=str(outside), mode=0o755),
        _call("metadata", path=str(outside), mtime=946684800),
    ), "--name", "meta", "--lock", str(lock), "--contain", "--contain-write", str(ws))  # fmt: skip
    assert out == ["changed", "changed", "changed"]  # Landlock refused none of them
    assert outside.stat().st_mode & 0o777 == 0o755 and outside.stat().st_mtime == 946684800
    facts = events(home, "trace-file", sid)
    assert [(f["change"], f["path"], f["detail"], f["result"]) for f in facts] == [
        ("mode", str(outside), "0755", "ok"),
        ("times", str(outside), "", "ok"),
    ]  # the changes inside the write directory are no facts
    assert all("outside the --contain-write directories" in f["outside"] for f in facts)
    text = mcpshim(home, "review", "--session", sid).stdout
    chmod = text.split("tools/call metadata (id 4)")[1].split("\n== ")[0]
    assert "[MEDIUM] MCS412 metadata-outside-write-dirs (observed): " in chmod
    assert f"changed the mode of {outside} to 0755" in chmod
    utime = text.split("tools/call metadata (id 5)")[1].split("\n== ")[0]
    assert (
        "[LOW] MCS412 metadata-outside-write-dirs (observed): " in utime and str(outside) in utime
    )


MEMFD = (
    "import os\n"
    "fd = os.memfd_create('payload', 0)\n"
    "os.write(fd, open('/bin/true', 'rb').read())\n"
    "os.execve(fd, ['payload'], {})\n"
)


def test_an_escape_past_the_path_rules_has_one_severity_in_every_view(
    home: Home, tmp_path: Path
) -> None:
    """The ELF loader run by hand and a memfd were MCS411 high in plain review and a new
    executable, MCS530 medium (the loader: a package vouches for it), under --lock."""
    copy = tmp_path / "copied-true"
    shutil.copy("/bin/true", copy)
    sid, _ = run_mcp(home, SERVER, _calls(_call("run", argv=["/bin/true"])), "--name", "esc")
    lock = tmp_path / "mcpshim.lock"
    done = mcpshim(home, "approve", "--session", sid, "--lock", str(lock), "--yes")
    assert done.returncode == 0, done.stderr
    sid, out = run_mcp(home, SERVER, _calls(
        _call("run", argv=[LOADER, str(copy)]),
        _call("run", argv=[sys.executable, "-c", MEMFD]),
    ), "--name", "esc")  # fmt: skip
    assert out == ["status 0: ", "status 0: "]
    for view in ((), ("--lock", str(lock))):
        doc = json.loads(mcpshim(home, "review", "--session", sid, "--format", "json",
                                 *view).stdout)  # fmt: skip
        found = {f["message"]: (f["severity"], f["group"].rsplit(" ", 2)[-2:])
                 for f in doc["findings"] if f["rule"] == "MCS411"}  # fmt: skip
        assert found == {  # the same finding, under the call that ran it
            f"ran the ELF loader {LOADER} on {copy}: code no exec of its file shows": (
                "high", ["(id", "3)"]),
            "ran a program from memory (/memfd:payload): code no exec of its file shows": (
                "high", ["(id", "4)"]),
        }, view  # fmt: skip
        said = [f for f in doc["findings"] if f["rule"] == "MCS530"]
        assert not [f for f in said if LOADER in f["message"] or "memfd" in f["message"]]
        sarif = json.loads(mcpshim(home, "review", "--session", sid, "--format", "sarif",
                                   *view).stdout)  # fmt: skip
        levels = {r["level"] for r in sarif["runs"][0]["results"] if r["ruleId"] == "MCS411"}
        assert levels == {"error"}, view
    [trace] = traces_of(home, sid)
    spans = [ev.attributes for span in trace.spans for ev in span.events
             if ev.attributes.get("mcpshim.finding.rule.id") == "MCS411"]  # fmt: skip
    assert {a["mcpshim.finding.severity"] for a in spans} == {"high"} and len(spans) == 2


@pytest.fixture
def ports() -> Iterator[tuple[int, int]]:
    socks = []
    for _ in range(2):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        socks.append(s)
    yield socks[0].getsockname()[1], socks[1].getsockname()[1]
    for s in socks:
        s.close()


@pytest.fixture
def unix_listener(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "browser.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(8)
    yield path
    s.close()


@pytest.mark.skipif(ABI < 4, reason="TCP rules need Landlock ABI 4 (Linux 6.7)")
def test_mptcp_is_refused_and_a_unix_destination_keeps_the_tcp_rules(
    home: Home, tmp_path: Path, ports: tuple[int, int], unix_listener: str
) -> None:
    install(home, ["git"])
    allowed, other = ports
    sid, out = run_mcp(home, SERVER, _calls(
        _call("connect", port=allowed, hold=1.5),
        _call("connect", unix=unix_listener, hold=1.5),
    ), "--name", "holes")  # fmt: skip
    assert out == ["connected", "connected"]
    lock = tmp_path / "mcpshim.lock"
    done = mcpshim(home, "approve", "--session", sid, "--lock", str(lock), "--yes")
    assert done.returncode == 0, done.stderr
    approval = load_lock(lock).servers["holes"]
    # the server's own sockets: filed outside tool calls (the server is no call's process)
    listed = {*approval.startup.destinations, *approval.tools["connect"].boundary.destinations}
    assert listed == {f"127.0.0.1:{allowed}", unix_listener}

    sid, out = run_mcp(home, SERVER, _calls(
        _call("connect", port=other),
        _call("connect", port=other, mptcp=True),
        _call("connect", port=allowed, mptcp=True),
        _call("connect", port=allowed),
        _call("connect", unix=unix_listener),
    ), "--name", "holes", "--lock", str(lock), "--contain")  # fmt: skip
    assert out == [
        "error: Permission denied",  # a port the lock does not list, held though it lists a socket
        "error: Permission denied",  # MPTCP: refused, whatever the port
        "error: Permission denied",
        "connected",
        "connected",  # Unix sockets are a named limit
    ]
    [start] = events(home, "session-start", sid)
    contain = start["contain"]
    assert contain["connect"] == [allowed] and contain["mptcp"] == "refused"
    assert contain["not_restricted"] == [
        "UDP",
        f"Unix sockets (the lock lists {unix_listener})",
        "listening",
    ]
