"""Launch-line rules (MCS22x) over real config files, positive and negative."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from mcpshim.pathcheck.clientconfig import load_config
from mcpshim.pathcheck.launch import fetcher, lint_config
from mcpshim.pathcheck.lint import LintSettings
from mcpshim.review.findings import Finding
from tests.fixtures.home import CONFIGS, Home

FIXTURES = CONFIGS
SECRETS = (
    "ghp_FAKE0TOKEN0FOR0MCPSHIM0TESTS000000000",
    "sk-proj-FAKEKEYFORMCPSHIMTESTS0000",
    "hunter2pass",
    "BSAfakeBraveKeyForMcpshimTests",
)


def settings(tmp_path: Path) -> LintSettings:
    return LintSettings(
        trusted_dirs=("/usr/bin", "/bin"),
        temp_dirs=(str(tmp_path / "scratch"),),
        sensitive_commands=("git",),
        shim_dir=str(tmp_path / "shims"),
        shim_source="from --dir",
        owners=frozenset({0, os.geteuid()}),
    )


def write(tmp_path: Path, servers: Mapping[str, object], name: str = ".mcp.json") -> Path:
    p = tmp_path / "proj" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return p


def run(
    tmp_path: Path, servers: Mapping[str, object], path: str = "/usr/bin:/bin"
) -> list[Finding]:
    cfg = load_config(write(tmp_path, servers))
    return lint_config(cfg, [], settings(tmp_path), {"PATH": path}).findings


def ids(findings: list[Finding], prefix: str = "MCS22") -> list[str]:
    return sorted(f.rule.id for f in findings if f.rule.id.startswith(prefix))


def test_bare_command_resolved_through_path(tmp_path: Path) -> None:
    f = run(tmp_path, {"a": {"command": "sh", "args": ["server.sh"]}})
    (bare,) = [x for x in f if x.rule.id == "MCS220"]
    assert "'sh' is a bare name: on its PATH it resolves to /usr/bin/sh" in bare.message
    assert bare.location.endswith(".mcp.json") and bare.line == 3
    assert ids(run(tmp_path, {"a": {"command": "/usr/bin/env", "args": []}})) == []


def test_relative_command(tmp_path: Path) -> None:
    (x,) = run(tmp_path, {"a": {"command": "./bin/server"}})[:1]
    assert x.rule.id == "MCS220" and "relative to the client's directory" in x.message


def test_command_in_temp_or_writable_dir(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    prog = scratch / "server"
    prog.write_text("#!/bin/sh\n")
    prog.chmod(0o755)
    f = run(tmp_path, {"a": {"command": str(prog)}})
    assert ids(f) == ["MCS221"] and "temporary directory" in f[0].message
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    (open_dir / "server").write_text("#!/bin/sh\n")
    (open_dir / "server").chmod(0o755)
    f = run(tmp_path, {"a": {"command": "server"}}, path=f"{open_dir}:/usr/bin")
    assert ids(f) == ["MCS220", "MCS221"]
    assert "world-writable" in next(x for x in f if x.rule.id == "MCS221").message
    safe = tmp_path / "safe"
    safe.mkdir()
    (safe / "server").write_text("#!/bin/sh\n")
    (safe / "server").chmod(0o755)
    assert ids(run(tmp_path, {"a": {"command": str(safe / "server")}})) == []


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["npx", "-y", "@scope/pkg"], "npx fetches and runs @scope/pkg from the npm registry"),
        (["npx", "pkg@1.2.3"], "npx fetches and runs pkg@1.2.3"),
        (["uvx", "mcp-server-fetch"], "uvx fetches and runs mcp-server-fetch"),
        (["/usr/local/bin/bunx", "x"], "bunx fetches and runs x"),
        (["pipx", "run", "pkg"], "pipx run fetches and runs pkg"),
        (["uv", "tool", "run", "pkg"], "uv tool run fetches and runs pkg"),
        (["pnpm", "dlx", "pkg"], "pnpm dlx fetches and runs pkg"),
        (["env", "A=1", "npx", "-y", "p"], "npx fetches and runs p"),
        (["docker", "run", "-i", "--rm", "img"], "image img has no tag"),
        (["docker", "run", "-e", "K", "--name", "n", "img:latest"], "uses the :latest tag"),
        (
            ["podman", "run", "--env=K=v", "reg.io/a/b:1.2"],
            "pinned by tag :1.2, which can be moved",
        ),
        (["docker", "run", "-it", "reg:5000/img"], "image reg:5000/img has no tag"),
        (["docker", "run", "img@sha256:" + "a" * 64], None),
        (["docker", "ps"], None),
        (["pipx", "list"], None),
        (["node", "server.js"], None),
        (["npm", "start"], None),
    ],
)
def test_fetchers(argv: list[str], expect: str | None) -> None:
    got = fetcher(argv)
    if expect is None:
        assert got is None
    else:
        assert got is not None and expect in got


def test_shell_launch_line(tmp_path: Path) -> None:
    f = run(tmp_path, {"a": {"command": "/bin/bash", "args": ["-lc", "cd x && exec node s.js"]}})
    assert ids(f) == ["MCS223"] and "bash -lc" in f[0].message
    assert ids(run(tmp_path, {"a": {"command": "/bin/sh", "args": ["./server.sh"]}})) == []


def test_literal_credentials_are_named_never_printed(tmp_path: Path) -> None:
    servers = {
        "a": {
            "command": "/usr/bin/env",
            "args": ["--token", "plainvalue123", "https://bob:pw0rd@example.com/x"],
            "env": {
                "DB_PASSWORD": "hunter2pass",
                "NOTE": "uses ghp_FAKE0TOKEN0FOR0MCPSHIM0TESTS000000000",
                "GITHUB_TOKEN": "${GITHUB_TOKEN}",
                "OPENAI_API_KEY": "",
                "LOG_LEVEL": "debug",
            },
        },
        "r": {
            "type": "http",
            "url": "https://api.example.com/mcp",
            "headers": {"Authorization": "Bearer abcdefghijklmnop", "X-Trace": "1"},
        },
        "ok": {"type": "http", "url": "https://x", "headers": {"Authorization": "Bearer ${T}"}},
    }
    f = [x for x in run(tmp_path, servers) if x.rule.id == "MCS224"]
    msgs = sorted(x.message for x in f)
    assert msgs == [
        "args[1] holds a literal credential (option-value)",
        "args[2] holds a literal credential (url-password)",
        "env.DB_PASSWORD holds a literal credential",
        "env.NOTE holds a literal credential (looks like github-token)",
        "headers.Authorization holds a literal credential (looks like authorization)",
    ]
    blob = repr(f)
    for secret in ("plainvalue123", "pw0rd", "hunter2pass", "ghp_FAKE0", "abcdefghijklmnop"):
        assert secret not in blob


@pytest.mark.parametrize(
    "path",
    [
        FIXTURES / "claude-desktop" / "claude_desktop_config.json",
        FIXTURES / "claude-code" / ".mcp.json",
        FIXTURES / "cursor" / ".cursor" / "mcp.json",
        FIXTURES / "vscode" / ".vscode" / "mcp.json",
    ],
)
def test_fixture_findings_never_hold_secrets(tmp_path: Path, path: Path) -> None:
    result = lint_config(load_config(path), [], settings(tmp_path), {"PATH": "/usr/bin:/bin"})
    assert result.findings
    blob = repr(result.findings) + repr(result.notes)
    for secret in SECRETS:
        assert secret not in blob


def test_fixture_expectations(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/alice"}

    def per_server(path: Path) -> dict[str, list[str]]:
        got: dict[str, list[str]] = {}
        for x in lint_config(load_config(path), [], settings(tmp_path), env).findings:
            if x.rule.id.startswith("MCS22"):
                got.setdefault(x.group, []).append(x.rule.id)
        return {k: sorted(v) for k, v in got.items()}

    assert per_server(FIXTURES / "claude-desktop" / "claude_desktop_config.json") == {
        "filesystem": ["MCS220", "MCS222"],
        "github": ["MCS220", "MCS222", "MCS224"],
        "sqlite": ["MCS222"],
    }
    assert per_server(FIXTURES / "cursor" / ".cursor" / "mcp.json") == {
        "postgres": ["MCS220", "MCS223", "MCS224"],
        "brave-search": ["MCS220", "MCS224"],
    }
    vs = per_server(FIXTURES / "vscode" / ".vscode" / "mcp.json")
    assert vs["Perplexity"] == ["MCS220", "MCS222"]  # ${input:...} is not a literal
    assert vs["fetch"] == ["MCS220", "MCS222"]
    assert "workspace-tools" not in vs  # ${workspaceFolder} expands to an absolute path


def test_server_selection_and_shared_path_linted_once(tmp_path: Path) -> None:
    cfg = load_config(FIXTURES / "claude-desktop" / "claude_desktop_config.json")
    s = settings(tmp_path)
    one = lint_config(cfg, ["sqlite"], s, {"PATH": "/usr/bin:/bin"})
    assert {x.group for x in one.findings} == {"sqlite", "PATH of sqlite"}
    every = lint_config(cfg, [], s, {"PATH": "/usr/bin:/bin"})
    shim = [x for x in every.findings if x.rule.id == "MCS207"]
    assert [x.group for x in shim] == ["PATH of filesystem, github, sqlite"]
    assert any("PATH from Claude Desktop passes on its own PATH" in n for n in every.notes)


def test_a_wrapped_server_is_linted_as_the_command_inside_its_wrapper(
    home: Home, tmp_path: Path
) -> None:
    """Issue 30 item 3: after wrap-config the launch line is `mcpshim run --mcp -- npx -y
    ...`, and lint-path saw only the wrapper (7 findings before wrapping, 2 after)."""
    config = tmp_path / "claude_desktop_config.json"
    config.write_bytes((FIXTURES / "claude-desktop" / "claude_desktop_config.json").read_bytes())

    def launch(path: Path) -> tuple[list[tuple[str, str]], list[str], list[str]]:
        done = lint_config(load_config(path), [], settings(tmp_path), {"PATH": "/usr/bin:/bin"})
        found = [f for f in done.findings if f.rule.id.startswith("MCS22")]
        return sorted((f.rule.id, f.group) for f in found), [f.message for f in found], done.notes

    before, said_before, _ = launch(config)
    assert len(before) >= 5 and ("MCS222", "filesystem") in before
    argv = [sys.executable, "-m", "mcpshim", "wrap-config", str(config), "--all",
            "--dir", str(tmp_path / "shims")]  # fmt: skip
    done = subprocess.run(argv, env=home.env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    after, said_after, notes = launch(config)
    assert after == before  # the same findings, server by server
    assert all(m.endswith(" (inside its mcpshim run wrapper)") for m in said_after)
    assert not any("wrapper" in m for m in said_before)
    assert any(n.startswith("filesystem: wrapped (mcpshim run); linted as what it starts: npx")
               for n in notes)  # fmt: skip


def test_a_wrapper_in_a_temporary_directory_is_its_own_finding(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    fake = scratch / "mcpshim"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    path = write(tmp_path, {"s": {"command": str(fake), "args": ["run", "--", "/usr/bin/git"]}})
    done = lint_config(load_config(path), [], settings(tmp_path), {"PATH": "/usr/bin:/bin"})
    [unsafe] = [f for f in done.findings if f.rule.id == "MCS221"]
    assert str(fake) in unsafe.message and "inside its mcpshim run" not in unsafe.message
