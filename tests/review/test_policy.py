from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mcpshim.errors import InputError
from mcpshim.review import policy
from mcpshim.review.findings import Evidence, Finding, Rule, Severity, define_rule
from mcpshim.shim import targets
from tests.fixtures.home import Home
from tests.fixtures.reviewkit import Lab

RULE = define_rule("MCS901", "policy-test", Severity.LOW, "test rule", "none")
OTHER = define_rule("MCS902", "policy-test-2", Severity.MEDIUM, "test rule", "none")


def _finding(rule: Rule = RULE, command: str = "git", path: str = "/usr/bin/git") -> Finding:
    return Finding(rule, "m", (Evidence("log@0", "t", {"command": command, "path": path}),))


def test_defaults_follow_the_shim_module() -> None:
    p = policy.load_policy(None)
    for d in targets.trusted_search_path():
        assert d in p.trusted_dirs
    assert "/usr/sbin" in p.trusted_dirs
    assert "/tmp" in p.temp_dirs
    assert any(d.endswith("/Downloads") for d in p.temp_dirs)
    assert "curl" in p.sensitive_commands
    assert p.ignores == () and dict(p.severity) == {}


def test_starter_round_trips(tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text(policy.dumps_starter())
    p = policy.load_policy(f)
    assert p.commands == {} and p.source == str(f)
    assert dataclasses.replace(p, source="") == policy.default_policy()


def test_the_starter_flags_nothing_the_default_review_does_not(home: Home, tmp_path: Path) -> None:
    """`policy init` is neutral (issue 30 item 8): its active [commands.git] once made
    `git --version` a medium MCS113. Real shims, real execs, both policies."""
    lab = Lab(home)
    lab.install("git", "sh")
    repo = tmp_path / "repo"
    repo.mkdir()
    for argv in (["git", "--version"], ["git", "init", "-q"], ["git", "status", "--short"],
                 ["git", "-C", str(repo), "log", "-1"], ["sh", "-c", "git rev-parse HEAD; true"],
                 ["git", "config", "user.name"]):  # fmt: skip
        lab.run(argv, cwd=repo)
    f = tmp_path / "starter.toml"
    f.write_text(policy.dumps_starter())

    def shown(pol: policy.Policy) -> list[tuple[str, str, str]]:
        return sorted((x.rule.id, x.level.label, x.message) for x in lab.review(pol))

    default = shown(policy.default_policy())
    assert default  # the session is not empty of findings (MCS101 PATH lookups at least)
    assert shown(policy.load_policy(f)) == default


def test_unlisted_destinations_are_graded_by_where_they_go(tmp_path: Path) -> None:
    base = policy.default_policy()
    assert [base.grade(s).label for s in ("loopback", "unix", "remote", None, "any")] == [
        "low", "low", "medium", "medium", "medium",
    ]  # fmt: skip
    f = tmp_path / "p.toml"
    f.write_text("[network]\nloopback = 'medium'\nremote = 'HIGH'\n")
    p = policy.load_policy(f)
    assert [p.grade(s).label for s in ("loopback", "unix", "remote")] == ["medium", "low", "high"]


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ("version = 1\n\n[commands.git]\ntargets = '/usr/bin/git'\n", 4, "commands.git.targets"),
        ("[commands.git]\ntarget = ['/usr/bin/git']\n", 2, "commands.git.target"),
        ("trusted_dirs = [1]\n", 1, "trusted_dirs"),
        ("colour = 'red'\n", 1, "colour"),
        ("[severity]\nMCS101 = 'urgent'\n", 2, "severity.MCS101"),
        ("[[ignore]]\nreason = 'x'\n", 1, "ignore"),
        ("[network]\ndestinations = 'github.com'\n", 2, "network.destinations"),
        ("[network]\nloopback = 'urgent'\n", 2, "network.loopback"),
        ("[network]\nunix = 1\n", 2, "network.unix"),
    ],
)
def test_malformed_policy_names_file_line_and_key(
    tmp_path: Path, text: str, line: int, key: str
) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(InputError) as err:
        policy.load_policy(f)
    msg = str(err.value)
    assert msg.startswith(f"{f}:{line}: ")
    assert f"policy key {key}:" in msg
    assert err.value.exit_code == 2


def test_toml_syntax_error_names_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text("version = 1\ntrusted_dirs = [\n'/a',\n")
    with pytest.raises(InputError, match=r"bad\.toml:3: not valid TOML"):
        policy.load_policy(f)
    f.write_text("version = 1\nx = = 2\n")
    with pytest.raises(InputError, match=r"bad\.toml:2: not valid TOML: .*line 2"):
        policy.load_policy(f)


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read policy"):
        policy.load_policy(tmp_path / "nope.toml")


def test_ignores_and_overrides(tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text(
        "[severity]\nMCS901 = 'high'\nMCS902 = 'off'\n\n"
        "[[ignore]]\ncommand = 'ssh'\n\n"
        "[[ignore]]\nrule = 'MCS901'\npath = '/opt/*'\n"
    )
    p = policy.load_policy(f)
    kept = policy.apply_policy(
        [
            _finding(),  # kept, raised to high
            _finding(OTHER),  # severity off
            _finding(command="ssh", path="/usr/bin/ssh"),  # ignored by command
            _finding(path="/opt/x/git"),  # ignored by rule + path glob
        ],
        p,
    )
    assert [(f.rule.id, f.level) for f in kept] == [("MCS901", Severity.HIGH)]
    # An ignore with rule and path only drops findings matching both.
    assert policy.apply_policy([_finding(OTHER, path="/opt/x/git")], policy.default_policy())
