"""lint-path and wrap-config through the installed `mcpshim` executable (real processes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from mcpshim.errors import McpshimError
from mcpshim.pathcheck import facts as pathfacts
from mcpshim.pathcheck.clientconfig import load_config
from tests.fixtures.home import CONFIGS, SARIF_SCHEMA, Home

MCPSHIM = str(Path(sys.executable).parent / "mcpshim")
FIXTURES = CONFIGS
DESKTOP = Path("claude-desktop/claude_desktop_config.json")
VSCODE = Path("vscode/.vscode/mcp.json")
TOKEN = "ghp_FAKE0TOKEN0FOR0MCPSHIM0TESTS000000000"


def mcpshim(
    home: Home, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCPSHIM, *args],
        capture_output=True,
        text=True,
        env={**home.env, **(env or {})},
        timeout=60,
    )


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    """Defaults, except that tmp_path (under /tmp) does not count as a temporary directory."""
    p = tmp_path / "policy.toml"
    p.write_text('version = 1\ntemp_dirs = ["/nonexistent-temp"]\ntrusted_dirs = ["/usr/bin"]\n')
    return p


def rules(out: str) -> set[str]:
    return {f["rule"] for f in json.loads(out)["findings"]}


def test_clean_path_exits_0(home: Home, tmp_path: Path, policy: Path) -> None:
    shim = tmp_path / "shims"
    shim.mkdir()
    r = mcpshim(home, "lint-path", f"{shim}:/usr/bin", "--dir", str(shim), "--policy", str(policy))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 finding(s)" in r.stdout
    assert f"shim_dir: {shim} (from --dir)" in r.stdout


def test_fail_on_threshold(home: Home, tmp_path: Path, policy: Path) -> None:
    shim = tmp_path / "shims"
    shim.mkdir()
    args = ["lint-path", f"{shim}:/usr/bin:/usr/bin", "--dir", str(shim), "--policy", str(policy)]
    r = mcpshim(home, *args)
    assert r.returncode == 0 and "[LOW] MCS208 path-duplicate-entry" in r.stdout
    assert mcpshim(home, *args, "--fail-on", "low").returncode == 1
    assert mcpshim(home, "lint-path", f".:{shim}", "--dir", str(shim)).returncode == 1


def test_default_shim_dir_is_said(home: Home) -> None:
    r = mcpshim(home, "lint-path", "/usr/bin")
    assert r.returncode == 1
    assert f"{home.loc.shim_dir} (the default; pass --dir to name another)" in r.stdout
    # a finding that never had evidence does not claim occurrences were left out (MCS207
    # said "... 1 more occurrence(s) not kept": issue 30 item 10)
    assert "MCS207" in r.stdout and "not kept" not in r.stdout


def test_env_source(home: Home, tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    drop.chmod(0o777)
    crafted = f"{drop}:/usr/bin:/bin"
    r = mcpshim(home, "lint-path", "--env", "--format", "json", env={"PATH": crafted})
    doc = json.loads(r.stdout)
    assert doc["subject"]["PATH"] == crafted
    assert {"MCS204", "MCS205", "MCS207"} <= rules(r.stdout)


def test_pid_reads_the_real_process_path(home: Home, tmp_path: Path) -> None:
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "git").write_text("#!/bin/sh\n")
    (evil / "git").chmod(0o755)
    crafted = f".:{evil}:/usr/bin:/bin"
    child = subprocess.Popen(["/bin/sleep", "60"], env={"PATH": crafted}, cwd=tmp_path)
    try:
        r = mcpshim(home, "lint-path", "--pid", str(child.pid), "--format", "json")
    finally:
        child.kill()
        child.wait()
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["subject"]["PATH"] == crafted
    assert doc["subject"]["source"] == f"pid {child.pid}"
    found = {(f["rule"], f["evidence"][0]["path"]) for f in doc["findings"] if f["evidence"]}
    assert ("MCS202", ".") in found
    assert ("MCS209", str(evil)) in found
    shadow = next(f for f in doc["findings"] if f["rule"] == "MCS209")
    assert shadow["evidence"][0]["command"] == "git"


def test_pid_errors(home: Home) -> None:
    r = mcpshim(home, "lint-path", "--pid", "999999999")
    assert r.returncode == 2 and "no process 999999999" in r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_pid_permission_denied(tmp_path: Path) -> None:
    """A reader without rights to a root process's environ gets a clear InputError."""
    child = subprocess.Popen(["/bin/sleep", "60"], env={"PATH": "/usr/bin"})
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked test process drops to uid 12345, then reads /proc/PID/environ
        os.close(read_fd)
        try:
            os.setgid(12345)
            os.setuid(12345)
            pathfacts.process_path(child.pid)
            msg = "read it"
        except McpshimError as exc:
            msg = f"{type(exc).__name__}: {exc}"
        os.write(write_fd, msg.encode())
        os._exit(0)
    os.close(write_fd)
    try:
        with os.fdopen(read_fd, "rb") as fh:
            msg = fh.read().decode()
        os.waitpid(pid, 0)
    finally:
        child.kill()
        child.wait()
    assert msg.startswith("InputError: cannot read /proc/"), msg
    assert "permission denied" in msg


@pytest.mark.parametrize(
    "args",
    [[], ["/usr/bin", "--env"], ["--env", "--server", "x"], ["--pid", "1", "--config", "x.json"]],
)
def test_usage_errors(home: Home, args: list[str]) -> None:
    r = mcpshim(home, "lint-path", *args)
    assert r.returncode == 2 and "mcpshim: error:" in r.stderr


def test_json_envelope_is_pinned(home: Home) -> None:
    r = mcpshim(home, "lint-path", ":/usr/bin", "--format", "json")
    doc = json.loads(r.stdout)
    assert list(doc) == ["schema", "tool", "command", "subject", "notes", "summary", "findings"]
    assert doc["schema"] == "mcpshim.findings/1" and doc["command"] == "lint-path"
    assert list(doc["subject"]) == ["source", "PATH", "shim_dir", "policy"]
    f = next(x for x in doc["findings"] if x["rule"] == "MCS201")
    assert list(f) == [
        "rule", "name", "severity", "confidence", "message", "count", "group", "fingerprint",
        "evidence",
    ]  # fmt: skip
    assert f["evidence"][0] == {
        "where": "argument PATH[0]",
        "text": "(empty)",
        "command": "",
        "path": "",
        "index": 0,
    }


def _validate_sarif(text: str) -> dict[str, object]:
    schema = json.loads(SARIF_SCHEMA.read_text())
    doc: dict[str, object] = json.loads(text)
    jsonschema.validate(doc, schema)
    return doc


def test_sarif_for_path_and_config(home: Home, tmp_path: Path) -> None:
    r = mcpshim(home, "lint-path", ":.:/usr/bin", "--format", "sarif")
    doc = _validate_sarif(r.stdout)
    run = doc["runs"][0]  # type: ignore[index]
    assert {x["ruleId"] for x in run["results"]} >= {"MCS201", "MCS202", "MCS207"}
    rules_meta = {x["id"]: x for x in run["tool"]["driver"]["rules"]}
    assert "external/cwe/cwe-427" in rules_meta["MCS201"]["properties"]["tags"]
    cfg = tmp_path / DESKTOP
    cfg.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / DESKTOP, cfg)
    r = mcpshim(home, "lint-path", "--config", str(cfg), "--format", "sarif")
    doc = _validate_sarif(r.stdout)
    results = doc["runs"][0]["results"]  # type: ignore[index]
    cred = next(x for x in results if x["ruleId"] == "MCS224")
    loc = cred["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == str(cfg) and loc["region"]["startLine"] == 12
    assert TOKEN not in r.stdout


@pytest.mark.parametrize("rel", [DESKTOP, VSCODE])
def test_config_text_names_path_source_and_hides_secrets(
    home: Home, tmp_path: Path, rel: Path
) -> None:
    cfg = tmp_path / rel
    cfg.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / rel, cfg)
    r = mcpshim(home, "lint-path", "--config", str(cfg), env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 1, r.stderr
    assert "passes on its own PATH; assumed to be this process's PATH: /usr/bin:/bin" in r.stdout
    assert TOKEN not in r.stdout
    one = mcpshim(home, "lint-path", "--config", str(cfg), "--server", "nope")
    assert one.returncode == 2 and "no server named 'nope'" in one.stderr


def test_malformed_config_exit_2_with_position(home: Home, tmp_path: Path) -> None:
    cfg = tmp_path / ".vscode" / "mcp.json"
    cfg.parent.mkdir()
    cfg.write_text('{\n  "servers": {\n    "a": {"command": "x"} // ok\n    "b": {}\n  }\n}\n')
    for cmd in (["lint-path", "--config", str(cfg)], ["wrap-config", str(cfg), "--all"]):
        r = mcpshim(home, *cmd)
        assert r.returncode == 2
        assert f"{cfg}:4:5: expected ',' or '}}' after an object member" in r.stderr
        assert "Traceback" not in r.stderr


def test_policy_ignore_drops_a_finding(home: Home, tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    p.write_text('version = 1\n[[ignore]]\nrule = "MCS202"\npath = "."\nreason = "test"\n')
    r = mcpshim(home, "lint-path", ".:/usr/bin", "--format", "json", "--policy", str(p))
    assert "MCS202" not in rules(r.stdout)
    r = mcpshim(home, "lint-path", ".:/usr/bin", "--format", "json")
    assert "MCS202" in rules(r.stdout)


# ---- wrap-config -------------------------------------------------------------------------


def test_wrap_dry_run_then_wrap_then_undo(home: Home, tmp_path: Path) -> None:
    cfg = tmp_path / DESKTOP
    cfg.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / DESKTOP, cfg)
    original = cfg.read_bytes()
    r = mcpshim(home, "wrap-config", str(cfg), "--all", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert cfg.read_bytes() == original and not cfg.with_name(cfg.name + ".mcpshim-backup").exists()
    assert '+      "command": "' + MCPSHIM in r.stdout
    assert "GITHUB_PERSONAL_ACCESS_TOKEN" in r.stdout and TOKEN not in r.stdout
    assert "would wrap github:" in r.stdout
    r = mcpshim(home, "wrap-config", str(cfg), "--all")
    assert r.returncode == 0 and "backup:" in r.stdout
    wrapped = cfg.read_bytes()
    r = mcpshim(home, "wrap-config", str(cfg), "--all")
    assert "already wrapped github" in r.stdout and "nothing to change" in r.stdout
    assert cfg.read_bytes() == wrapped
    r = mcpshim(home, "wrap-config", str(cfg), "--undo")
    assert r.returncode == 0 and cfg.read_bytes() == original


def test_an_entry_wrapped_without_mcp_is_left_and_said_so(home: Home, tmp_path: Path) -> None:
    cfg = tmp_path / DESKTOP
    cfg.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / DESKTOP, cfg)
    assert mcpshim(home, "wrap-config", str(cfg), "--all", "--no-mcp").returncode == 0
    wrapped = cfg.read_bytes()
    r = mcpshim(home, "wrap-config", str(cfg), "--all")
    assert r.returncode == 0 and cfg.read_bytes() == wrapped  # left as it is
    assert f"already wrapped filesystem: {MCPSHIM} run -- npx -y" in r.stdout
    assert "note: github runs without --mcp" in r.stdout and "--undo, then wrap again" in r.stdout
    assert TOKEN not in r.stdout  # the launch lines shown keep credentials out
    r = mcpshim(home, "wrap-config", str(cfg), "--all", "--no-mcp")
    assert "already wrapped github" in r.stdout and "without --mcp" not in r.stdout


@pytest.mark.parametrize(
    "args", [["--undo", "--all"], [], ["--all", "--server", "x"], ["--server", "nope"]]
)
def test_wrap_usage_errors(home: Home, tmp_path: Path, args: list[str]) -> None:
    cfg = tmp_path / DESKTOP
    cfg.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / DESKTOP, cfg)
    r = mcpshim(home, "wrap-config", str(cfg), *args)
    assert r.returncode == 2 and "mcpshim: error:" in r.stderr


@pytest.mark.parametrize("flag", [[], ["--no-mcp"]])
def test_wrapped_entry_really_starts_with_shims_first(
    home: Home, tmp_path: Path, flag: list[str]
) -> None:
    """Start the wrapped launch line the way a client would: command, args, env; by
    default the session is relayed (its tool calls recorded), with --no-mcp it is not."""
    out = tmp_path / "seen-path"
    cfg = tmp_path / ".mcp.json"
    server = {"command": "/bin/sh", "args": ["-c", f'printf %s "$PATH" > {out}']}
    cfg.write_text(json.dumps({"mcpServers": {"probe": server}}, indent=2))
    r = mcpshim(
        home, "wrap-config", str(cfg), "--server", "probe", *flag, env={"PATH": "/usr/bin:/bin"}
    )
    assert r.returncode == 0, r.stderr
    s = load_config(cfg).server("probe")
    assert s.command == MCPSHIM
    run = subprocess.run(
        [s.command, *s.args],
        env={**home.env, **s.env},
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert out.read_text().split(":")[0] == str(home.loc.shim_dir)
    assert out.read_text().endswith("/usr/bin:/bin")
    kinds = [getattr(rec, "kind", "exec") for rec in home.records()]
    assert "session-start" in kinds and ("mcp-session" in kinds) == (not flag)


def test_pid_without_path_lints_the_execvp_default(home: Home) -> None:
    child = subprocess.Popen(["/bin/sleep", "60"], env={})
    try:
        r = mcpshim(home, "lint-path", "--pid", str(child.pid), "--format", "json")
    finally:
        child.kill()
        child.wait()
    doc = json.loads(r.stdout)
    assert doc["subject"]["PATH"] == "/bin:/usr/bin"
    assert f"process {child.pid} has no PATH; execvp falls back to /bin:/usr/bin" in doc["notes"]


def test_crafted_entries_are_terminal_safe(home: Home) -> None:
    r = mcpshim(home, "lint-path", "/usr/bin:rel\x1b[31mred\u202e:/usr/bin")
    assert "\x1b" not in r.stdout and "\u202e" not in r.stdout
    assert "rel\\e[31mred\\u202e" in r.stdout
