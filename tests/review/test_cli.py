"""review/rules/policy CLI: exit codes, the pinned JSON envelope, SARIF against the schema,
and policy.example.toml driving a real review."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import tty
from pathlib import Path

import click
import jsonschema
import pytest

from mcpshim import __version__
from mcpshim.cli import cli, main
from mcpshim.log import eventlog
from mcpshim.review import policy
from mcpshim.review.catalogue import rules as _catalogue
from tests.fixtures.home import REPO, SARIF_SCHEMA, Home
from tests.fixtures.reviewkit import Lab, fake_exec, ids, of

RULES = _catalogue()

BOOT = "cccccccc-0000-4000-8000-000000000004"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    out, err = capsys.readouterr()
    code = exit_.value.code
    return (code if isinstance(code, int) else 0), out, err


@pytest.fixture
def composed(home: Home) -> Lab:
    """A real log: a composed sh -c line running git, in a temporary cwd."""
    lab = Lab(home)
    lab.install("sh", "git")
    lab.run(["sh", "-c", "git --version; git --version | cat"], check=True)
    return lab


def test_exit_codes_follow_fail_on(composed: Lab, capsys: pytest.CaptureFixture[str]) -> None:
    # a composed line the server wrote is low (docs/verdicts.md): below the default gate
    code, out, _ = _run(capsys, "review")
    assert code == 0 and "MCS105" in out
    code, _, _ = _run(capsys, "review", "--fail-on", "low")
    assert code == 1
    code, _, _ = _run(capsys, "review", "--fail-on", "high")
    assert code == 0
    code, _, _ = _run(capsys, "review", "--fail-on", "info")
    assert code == 1
    code, _, err = _run(capsys, "review", "--fail-on", "urgent")
    assert code == 2 and "urgent" in err


def test_a_session_that_is_not_in_the_log_is_an_error(
    composed: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    composed.run(["git", "--version"], session="S-real", check=True)
    eventlog.append_event(composed.home.loc, "session-start", {"session": "S-events"})
    for command in ("review", "tree", "log", "report", "approve"):
        # A typo in a session id: said so, never an empty session that reviews clean.
        code, out, err = _run(capsys, command, "--session", "S-typo")
        assert (code, out) == (2, "") and "no such session 'S-typo'" in err, (command, err)
    for command in ("review", "tree"):
        # A session of events only (nothing exec'd) is there, and empty.
        code, out, err = _run(capsys, command, "--session", "S-events")
        assert code == 0 and "S-events" in out, err
    code, out, _ = _run(capsys, "review", "--session", "S-real", "--fail-on", "high")
    assert code == 0 and "MCS101" in out  # git through PATH
    code, out, _ = _run(capsys, "tree", "--session", "S-real")
    assert code == 0 and "git --version" in out and "sh -c" not in out


def test_malformed_policy_exits_2_naming_file_line_key(
    composed: Lab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("version = 1\n[commands.git]\nsubcommands = 'status'\n")
    code, out, err = _run(capsys, "review", "--policy", str(bad))
    assert code == 2 and out == ""
    assert f"{bad}:3: policy key commands.git.subcommands" in err
    assert "Traceback" not in err


def test_text_groups_by_family_with_evidence(
    composed: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = _run(capsys, "review", "--fail-on", "high")
    lines = out.splitlines()
    [head] = [ln for ln in lines if ln.startswith("== ")]
    assert "family under pid" in head
    i = next(i for i, ln in enumerate(lines) if "MCS105" in ln)
    assert "exec.log@" in lines[i + 1] and "sh -c" in lines[i + 1]
    # MCS104 once for the directory, not per command; the two PATH lookups that reached
    # pinned shims are routine: info, on one line without evidence
    assert lines[-1].endswith("2 low, 2 info") and "finding(s)" in lines[-1]
    [routine] = [ln for ln in lines if ln.startswith("  routine (info): ")]
    assert routine.count("MCS101") == 2


def test_json_envelope_is_pinned(composed: Lab, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(capsys, "review", "--format", "json")
    doc = json.loads(out)
    assert list(doc) == [
        "schema",
        "tool",
        "command",
        "subject",
        "notes",
        "summary",
        "coverage",
        "findings",
    ]
    assert doc["schema"] == "mcpshim.findings/1"
    assert doc["tool"] == {"name": "mcpshim", "version": __version__}
    assert doc["command"] == "review"
    assert list(doc["subject"]) == [
        "log",
        "session",
        "policy",
        "baseline",
        "records",
        "processes",
        "families",
        "sealed",
    ]
    assert doc["subject"]["records"] == 3 and doc["subject"]["families"] == 1
    assert list(doc["summary"]) == ["total", "by_severity"]
    assert list(doc["summary"]["by_severity"]) == ["info", "low", "medium", "high"]
    f = next(f for f in doc["findings"] if f["rule"] == "MCS105")
    assert list(f) == [
        "rule",
        "name",
        "severity",
        "confidence",
        "message",
        "count",
        "group",
        "fingerprint",
        "evidence",
    ]
    ev = f["evidence"][0]
    assert {"where", "text", "command", "path", "pid", "ppid", "start_ticks", "boot_id"} <= set(ev)
    assert ev["command"] == "sh" and ev["inner"] == "git --version; git --version | cat"
    assert doc["summary"]["total"] == len(doc["findings"])


def test_sarif_validates_and_carries_rule_metadata(
    composed: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = _run(capsys, "review", "--format", "sarif")
    doc = json.loads(out)
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(doc)
    driver = doc["runs"][0]["tool"]["driver"]
    rules = {r["id"]: r for r in driver["rules"]}
    assert {"MCS101", "MCS105", "MCS110", "MCS117"} <= set(rules)
    r = rules["MCS105"]
    assert r["name"] == "shell-composed-line"
    assert r["shortDescription"]["text"] and "Remediation" in r["help"]["text"]
    assert r["defaultConfiguration"]["level"] == "note"  # low (docs/verdicts.md)
    results = doc["runs"][0]["results"]
    assert {x["ruleId"] for x in results} >= {"MCS101", "MCS105"}
    for x in results:
        assert driver["rules"][x["ruleIndex"]]["id"] == x["ruleId"]


def test_rules_lists_every_review_rule(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "rules", "--format", "json")
    assert code == 0
    listed = {r["id"]: r for r in json.loads(out)["rules"]}
    review_ids = {k for k in RULES if k.startswith("MCS1")}
    assert review_ids <= set(listed) and len(review_ids) >= 17
    for rid in review_ids:
        assert listed[rid]["summary"] and listed[rid]["remediation"]
    _, text, _ = _run(capsys, "rules")
    assert "MCS101 path-resolved-exec [low, observed] (CWE-426, CWE-427)" in text
    assert "MCS502 executable-not-explained-by-tool [medium, hint]" in text


def test_policy_init_writes_a_loadable_starter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "p.toml"
    code, _, _ = _run(capsys, "policy", "init", "-o", str(out_file))
    assert code == 0
    p = policy.load_policy(out_file)
    assert p.commands == {} and p.trusted_dirs == policy.default_policy().trusted_dirs
    code, _, err = _run(capsys, "policy", "init", "-o", str(out_file))
    assert code == 2 and "exists" in err
    code, out, _ = _run(capsys, "policy", "init")
    assert out == out_file.read_text()


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["tree"],
        ["review"],
        ["rules"],
        ["policy"],
        ["policy", "init"],
        ["baseline"],
        ["baseline", "save"],
    ):
        code, out, _ = _run(capsys, *argv, "--help")
        assert code == 0 and "Usage: mcpshim" in out
    assert isinstance(cli, click.Group)


def test_example_policy_drives_a_review(home: Home, tmp_path: Path) -> None:
    example = policy.load_policy(REPO / "policy.example.toml")
    # documented keys all present in the example
    text = (REPO / "policy.example.toml").read_text()
    for key in ("trusted_dirs", "temp_dirs", "sensitive_commands", "cwd_roots", "strict_commands"):
        assert f"\n{key} = " in text
    for key in ("targets", "subcommands", "args", "destinations", "[severity]", "[[ignore]]"):
        assert key in text
    lab = Lab(home)
    lab.install("git", "ssh")
    lab.run(["git", "--version"], check=True)  # allowed by args = ["--version"]
    lab.run(["git", "ls-remote", "https://127.0.0.1:1/x"])  # allowed destination
    lab.run(["git", "ls-remote", "origin"], cwd=tmp_path)  # MCS109 is "off" in the example
    lab.run(["git", "push", "https://127.0.0.1:1/x"])  # push: not an allowed subcommand
    lab.run(["ssh", "-G", "git@github.com"])  # github.com is listed
    lab.run(["ssh", "-G", "git@198.51.100.7"])  # not listed
    default = lab.review()
    found = lab.review(example)
    assert "MCS109" in ids(default) and "MCS109" not in ids(found)
    assert [f.evidence[0].data["destination"] for f in of(found, "MCS108")] == ["198.51.100.7"]
    [args] = of(found, "MCS113")
    assert args.evidence[0].data["subcommand"] == "push"
    # PATH lookups that reached a pinned shim are info, listed in the policy or not
    levels = {f.evidence[0].data["command"]: f.level.label for f in of(found, "MCS101")}
    assert levels == {"git": "info", "ssh": "info"}


def _review(home: Home, terminal: bool) -> tuple[bytes, subprocess.CompletedProcess[bytes]]:
    """`mcpshim review` as a user runs it, its stderr a terminal (a pty, read while it runs:
    it holds little) or a pipe: (what the terminal got, the process)."""
    got = bytearray()
    master, slave = os.openpty() if terminal else (-1, subprocess.PIPE)
    if terminal:
        tty.setraw(slave)

    def read() -> None:
        with contextlib.suppress(OSError):  # EIO once the last writer is gone
            while chunk := os.read(master, 1 << 16):
                got.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    if terminal:
        reader.start()
    proc = subprocess.run(
        [sys.executable, "-m", "mcpshim", "review"],
        env=home.env,
        stdout=subprocess.PIPE,
        stderr=slave,
        timeout=300,
        check=False,
    )
    if terminal:
        os.close(slave)
        reader.join(60)
        os.close(master)
    return bytes(got), proc


def test_progress_on_a_terminal_only(home: Home) -> None:
    fake_exec(home.loc, boot=BOOT, pid=40, ppid=1, start=10)
    one = home.loc.log_file.read_bytes()
    with open(home.loc.log_file, "ab") as fh:
        fh.write(one * 119_999)  # 120,000 records: progress every 50,000
    shown, on_tty = _review(home, terminal=True)
    _, piped = _review(home, terminal=False)
    assert on_tty.returncode == piped.returncode == 0  # one exec, nothing at medium
    assert on_tty.stdout == piped.stdout  # nothing of it on stdout
    assert b"records" not in piped.stderr  # and nothing when stderr is not a terminal
    steps = re.findall(rb"\rmcpshim: ([\d,]+) records, (\d+)%", shown)
    assert [n for n, _ in steps] == [b"50,000", b"100,000"]
    assert 0 < int(steps[0][1]) < int(steps[1][1]) < 100
    assert shown.endswith(b"\r\x1b[K")  # the line is cleared before the report
