"""One positive and one negative case per rule, on logs written by real shims."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mcpshim.log import execlog
from mcpshim.paths import Locations
from mcpshim.review import engine as review
from mcpshim.review import policy
from mcpshim.review.rules.shell import constructs
from mcpshim.shim import install
from tests.fixtures.home import Home
from tests.fixtures.reviewkit import Lab, ids, of, policy_from

NO_TEMP = "temp_dirs = []\n"  # tests live under /tmp: make it an ordinary directory


@pytest.fixture
def lab(home: Home) -> Lab:
    return Lab(home)


def _tool(dirpath: Path, name: str = "mytool", mode: int = 0o755) -> Path:
    dirpath.mkdir(parents=True, exist_ok=True)
    f = dirpath / name
    f.write_text("#!/bin/sh\nexit 0\n")
    f.chmod(mode)
    return f


def test_mcs101_path_resolved(lab: Lab, home: Home) -> None:
    lab.install("git")
    lab.run(["git", "--version"], check=True)
    [f] = of(lab.review(), "MCS101")
    [rec] = home.execs()
    target = rec.target.decode()
    assert f"ran the pinned {target}" in f.message
    assert f.evidence[0].where == rec.where
    assert f.evidence[0].data["command"] == "git" and f.evidence[0].data["path"] == target
    # The lookup reached the shim, which ran its pin: the safe outcome, sensitive or not.
    assert f.level.label == "info"


def test_mcs101_read_from_the_record_wherever_the_shims_are(lab: Lab, home: Home) -> None:
    """Shims installed with --dir, reviewed without it (issue 15, defect 4): the record
    says the shim was reached through PATH; no flag is needed to read it."""
    elsewhere = home.root / "other-shims"
    install.install(Locations(elsewhere, home.loc.log_dir), ["git"], {})
    env = {**lab.env, "PATH": f"{elsewhere}:{lab.env['PATH']}"}
    subprocess.run(["git", "--version"], env=env, check=True, capture_output=True)
    problems: list[execlog.LogProblem] = []
    default_dir = home.root / "not-the-shim-dir"
    result = review.review(
        execlog.iter_records(home.loc, problems),
        policy=policy.default_policy(),
        shim_dir=str(default_dir),
        manifest=None,
    )
    [f] = of(result.findings, "MCS101")
    assert f.level.label == "info" and f.evidence[0].data["shim"] == f"{elsewhere}/git"


def test_mcs101_negative_explicit_path_and_pinned_target(lab: Lab, home: Home) -> None:
    lab.install("git")
    # called by a relative path (not a PATH lookup): argv[0] is ./git
    lab.run(["./git", "--version"], cwd=home.loc.shim_dir, check=True)
    assert "MCS101" not in ids(lab.review())
    lab.run(["git", "--version"], check=True)
    target = home.execs()[-1].target.decode()
    pol = policy_from(home.root, f"[commands.git]\ntargets = [{json.dumps(target)}]\n")
    [f] = of(lab.review(pol), "MCS101")
    assert f.level.label == "info"  # PATH lookup reached the pinned target


def test_mcs102_exec_and_script_in_temp_dir(lab: Lab, tmp_path: Path) -> None:
    tool = _tool(tmp_path / "bin")
    lab.install("mytool", targets={"mytool": str(tool)}, allow_unsafe=True)
    lab.install("sh")
    lab.run(["mytool"], check=True)
    script = tmp_path / "build.sh"
    script.write_text("exit 0\n")
    lab.run(["sh", str(script)], cwd="/", check=True)
    found = of(lab.review(), "MCS102")
    assert {f.evidence[0].data["path"] for f in found} == {str(tool), str(script)}
    assert all(f.level.label == "high" for f in found)


def test_mcs102_negative(lab: Lab, tmp_path: Path) -> None:
    lab.install("git", "sh")
    lab.run(["git", "--version"], check=True)
    lab.run(["sh", "-c", "exit 0"], check=True)
    assert "MCS102" not in ids(lab.review())
    # and a temp-dir tool is fine once the policy no longer calls the directory temporary
    tool = _tool(tmp_path / "bin")
    lab.install("mytool", targets={"mytool": str(tool)}, allow_unsafe=True)
    lab.run(["mytool"], check=True)
    assert "MCS102" not in ids(lab.review(policy_from(tmp_path, NO_TEMP)))


def test_an_ignored_temp_dir_finding_leaves_the_untrusted_one(lab: Lab, tmp_path: Path) -> None:
    # a checkout meant to be in /tmp: the policy ignores MCS102 beneath it, and what runs
    # from there is still outside the trusted directories (MCS119), not silent
    tool = _tool(tmp_path / "bin")
    (tmp_path / "bin").chmod(0o755)
    lab.install("mytool", targets={"mytool": str(tool)}, allow_unsafe=True)
    lab.run(["mytool"], check=True)
    ignore = f"[[ignore]]\nrule = 'MCS102'\npath = '{tmp_path}/*'\nreason = 'a CI checkout'\n"
    found = lab.review(policy_from(tmp_path, ignore))
    assert "MCS102" not in ids(found)
    [f] = of(found, "MCS119")
    assert f.evidence[0].data["path"] == str(tool)
    assert "MCS119" not in ids(lab.review())  # unignored: MCS102 says it, MCS119 steps aside


def test_mcs103_writable_dir(lab: Lab, tmp_path: Path) -> None:
    d = tmp_path / "shared-bin"
    tool = _tool(d)
    d.chmod(0o777)
    lab.install("mytool", targets={"mytool": str(tool)}, allow_unsafe=True)
    lab.run(["mytool"], check=True)
    [f] = of(lab.review(policy_from(tmp_path, NO_TEMP)), "MCS103")
    assert "group- or world-writable" in f.message


def test_mcs103_negative(lab: Lab, tmp_path: Path) -> None:
    d = tmp_path / "private-bin"
    tool = _tool(d)
    d.chmod(0o755)
    lab.install("mytool", targets={"mytool": str(tool)}, allow_unsafe=True)
    lab.run(["mytool"], check=True)
    found = lab.review(policy_from(tmp_path, NO_TEMP))
    assert "MCS103" not in ids(found)
    assert "MCS119" in ids(found)  # still outside the trusted directories


def test_mcs104_cwd_in_temp(lab: Lab, tmp_path: Path) -> None:
    lab.install("git")
    lab.run(["git", "--version"], cwd=tmp_path, check=True)
    [f] = of(lab.review(), "MCS104")
    assert f.evidence[0].data["cwd"] == str(tmp_path)


def test_mcs104_negative(lab: Lab) -> None:
    lab.install("git")
    lab.run(["git", "--version"], cwd="/", check=True)
    assert "MCS104" not in ids(lab.review())


def test_mcs105_composed_shell_line(lab: Lab) -> None:
    lab.install("sh", "git")
    line = "git --version > /dev/null; echo $(git --version) | cat && true &"
    lab.run(["sh", "-c", line], check=True)
    [f] = of(lab.review(), "MCS105")
    assert line in f.message
    assert set(f.evidence[0].data["constructs"]) == {
        "redirection >",
        "command list ;",
        "command substitution $(...)",
        "pipe |",
        "conditional &&",
        "background &",
    }
    assert "MCS106" not in ids(lab.review())


def test_mcs105_negative_and_mcs106(lab: Lab) -> None:
    lab.install("sh", "git")
    lab.run(["sh", "-c", "git --version"], check=True)
    found = lab.review()
    assert "MCS105" not in ids(found)
    [f] = of(found, "MCS106")
    assert f.message.endswith("git --version")


def test_mcs106_negative_no_dash_c(lab: Lab, tmp_path: Path) -> None:
    lab.install("sh")
    script = tmp_path / "s.sh"
    script.write_text("exit 0\n")
    lab.run(["sh", str(script)], check=True)
    assert not {"MCS105", "MCS106"} & ids(lab.review())


def test_constructs_respect_quotes() -> None:
    assert constructs("echo 'a; b | c' \"x && y\"") == []
    assert constructs('echo "$(id)"') == ["command substitution $(...)"]
    assert constructs("a 2>&1") == ["redirection >"]
    assert constructs("a\nb") == ["command list ;"]


def _package(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "package.json").write_text(
        json.dumps({"name": "p", "version": "1.0.0", "scripts": {"build": "echo built"}})
    )
    return d


npm_needed = pytest.mark.skipif(shutil.which("npm") is None, reason="npm not installed")


@npm_needed
def test_mcs107_npm_run_in_writable_checkout(lab: Lab, tmp_path: Path) -> None:
    lab.install("npm")
    proj = _package(tmp_path / "proj")
    out = lab.run(["npm", "run", "build"], cwd=proj, check=True)
    assert b"built" in out.stdout
    [f] = of(lab.review(), "MCS107")
    assert str(proj / "package.json") in f.message
    assert f.evidence[0].data["cwd"] == str(proj)


@npm_needed
def test_mcs107_negative(lab: Lab, tmp_path: Path) -> None:
    lab.install("npm")
    proj = _package(tmp_path / "proj")
    lab.run(["npm", "--version"], cwd=proj, check=True)
    lab.run(
        ["npm", "install", "--ignore-scripts", "--offline", "--no-audit", "--no-fund"], cwd=proj
    )
    empty = tmp_path / "no-project"
    empty.mkdir()
    lab.run(["npm", "run", "build"], cwd=empty)  # fails: no package.json, nothing ran
    assert len(lab.home.execs()) == 3
    assert "MCS107" not in ids(lab.review())


def test_mcs107_make(lab: Lab, tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    lab.install("make")
    proj = tmp_path / "mk"
    proj.mkdir()
    (proj / "Makefile").write_text("all:\n\t@true\n")
    lab.run(["make"], cwd=proj, check=True)
    lab.run(["make", "--version"], cwd=proj, check=True)
    [f] = of(lab.review(), "MCS107")
    assert f.message.startswith("make runs the recipes") and "(2 times" not in f.text


def test_mcs108_network_destinations(lab: Lab) -> None:
    lab.install("ssh", "git")
    lab.run(["ssh", "-G", "-p", "2222", "git@127.0.0.1"])
    lab.run(["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=1", "git@127.0.0.1", "true"])
    lab.run(["git", "ls-remote", "https://127.0.0.1:1/x"])
    found = of(lab.review(), "MCS108")
    assert {f.evidence[0].data["destination"] for f in found} == {
        "127.0.0.1:2222",
        "127.0.0.1",
        "127.0.0.1:1",
    }


def test_mcs108_negative_when_policy_lists_destination(lab: Lab, tmp_path: Path) -> None:
    lab.install("ssh", "git")
    lab.run(["ssh", "-G", "git@127.0.0.1"])
    lab.run(["git", "ls-remote", "https://127.0.0.1:1/x"])
    lab.run(["git", "--version"])
    pol = policy_from(
        tmp_path,
        '[network]\ndestinations = ["127.0.0.1"]\n[commands.git]\ndestinations = ["127.0.0.1:1"]\n',
    )
    assert "MCS108" not in ids(lab.review(pol))


def test_mcs109_destination_unknown(lab: Lab, tmp_path: Path) -> None:
    lab.install("git")
    lab.run(["git", "ls-remote", "origin"], cwd=tmp_path)
    [f] = of(lab.review(), "MCS109")
    assert "ls-remote" in f.message


def test_mcs109_negative(lab: Lab, tmp_path: Path) -> None:
    lab.install("git")
    lab.run(["git", "ls-remote", "git@127.0.0.1:x.git"], cwd=tmp_path)
    lab.run(["git", "status"], cwd=tmp_path)
    found = lab.review()
    assert "MCS109" not in ids(found)
    assert [f.evidence[0].data["destination"] for f in of(found, "MCS108")] == ["127.0.0.1"]


def test_mcs110_credential_in_arguments(lab: Lab, home: Home) -> None:
    lab.install("git")
    token = "ghp_" + "a1B2c3D4e5" * 4
    lab.run(["git", "ls-remote", f"https://x-access-token:{token}@127.0.0.1:1/x"])
    found = lab.review()
    [f] = of(found, "MCS110")
    assert f.level.label == "high"
    everything = json.dumps([[f.message, [e.text for e in f.evidence]] for f in found])
    assert token not in everything and "REDACTED" in everything


def test_mcs110_negative(lab: Lab) -> None:
    lab.install("git")
    lab.run(["git", "ls-remote", "https://127.0.0.1:1/x"])
    assert "MCS110" not in ids(lab.review())


def test_mcs111_target_changed_since_install(lab: Lab, tmp_path: Path) -> None:
    tool = _tool(tmp_path / "bin")
    lab.install("mytool", targets={"mytool": str(tool)}, allow_unsafe=True)
    lab.run(["mytool"], check=True)
    assert "MCS111" not in ids(lab.review())  # negative: unchanged
    with tool.open("a") as fh:
        fh.write("# changed\n")
    [f] = of(lab.review(), "MCS111")
    assert "now hashes to" in f.message
    tool.unlink()
    [f] = of(lab.review(), "MCS111")
    assert "missing" in f.message


def test_policy_rules_targets_args_cwd(lab: Lab, home: Home, tmp_path: Path) -> None:
    lab.install("git")
    allowed = tmp_path / "work"
    allowed.mkdir()
    lab.run(["git", "--version"], cwd="/", check=True)
    lab.run(["git", "status"], cwd=allowed)
    strict = policy_from(
        tmp_path,
        f'cwd_roots = ["{allowed}"]\n[commands.git]\ntargets = ["/opt/git"]\n'
        'subcommands = ["status"]\n',
    )
    found = lab.review(strict)
    [t] = of(found, "MCS112")
    assert "/opt/git" in t.message and len(t.evidence) == 2
    [a] = of(found, "MCS113")
    assert a.evidence[0].data["subcommand"] == ""  # git --version has no subcommand
    [c] = of(found, "MCS114")
    assert c.evidence[0].data["cwd"] == "/"
    target = home.execs()[0].target.decode()
    lenient = policy_from(
        tmp_path,
        f'cwd_roots = ["{allowed}", "/"]\n[commands.git]\ntargets = ["{target}"]\n'
        'subcommands = ["status"]\nargs = ["--version"]\n',
    )
    assert not {"MCS112", "MCS113", "MCS114", "MCS118"} & ids(lab.review(lenient))


def test_mcs118_strict_commands(lab: Lab, tmp_path: Path) -> None:
    lab.install("git", "sh")
    lab.run(["sh", "-c", "git --version"], check=True)
    pol = policy_from(tmp_path, "strict_commands = true\n[commands.git]\n")
    [f] = of(lab.review(pol), "MCS118")
    assert f.evidence[0].data["command"] == "sh"
    assert "MCS118" not in ids(lab.review())


def test_findings_group_by_family_and_cap_evidence(lab: Lab) -> None:
    lab.install("git", "sh")
    lab.run(["sh", "-c", "git --version; git --version; git --version; git --version"])
    lab.run(["git", "--version"])
    [f] = [f for f in of(lab.review(), "MCS101") if f.evidence[0].data["command"] == "git"]
    # all in one family (under this test process); four sh children + one direct
    # outside a relayed session the first three are kept (memory), the rest counted
    assert "(5 times)" in f.text and f.count == 5 and len(f.evidence) == 3
    assert f.group.startswith(f"family under pid {os.getpid()}")
