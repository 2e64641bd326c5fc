"""Hostile or broken input files: one clear line and exit 2 (or a record skipped and said
so), never a traceback and never exit 1, which means findings."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mcpshim.log import eventlog, execlog
from tests.fixtures.home import Home

MCPSHIM = [sys.executable, "-m", "mcpshim"]
S = "S-odd"


def cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPSHIM, *args], env=home.env, capture_output=True, text=True, timeout=120
    )


def one_error_line(out: subprocess.CompletedProcess[str], *words: str) -> str:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if not line.startswith("mcpshim: warning")]
    assert len(lines) == 1 and lines[0].startswith("mcpshim: error: "), out.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def _relayed_session(home: Home) -> None:
    """A small relayed session, as `run --mcp` writes it, for report to find."""
    t = "2026-11-30T21:03:05.000000+00:00"
    eventlog.append_event(home.loc, "mcp-session", {"session": S, "time": t})
    eventlog.append_event(
        home.loc, "session-start", {"session": S, "time": t, "child_pid": 9, "command": ["x"]}
    )
    req = {"session": S, "time": t, "direction": "client->server", "id": 1}
    eventlog.append_event(
        home.loc, "mcp-request", {**req, "method": "tools/call", "tool": "t", "arguments": {}}
    )
    resp = {"session": S, "time": t, "direction": "server->client", "id": 1, "is_error": False}
    eventlog.append_event(home.loc, "mcp-response", resp)


@pytest.mark.parametrize(
    "body",
    [b"[1,2]", b"null", b"NaN", b"1e999", b'{"session":"S-odd","time":NaN}',
     b"[" * 100_000 + b"]" * 100_000, b'{"session":"S-odd","pid":"x"}'],
    ids=["list", "null", "nan", "1e999", "nan-inside", "deep", "wrong-type"],
)  # fmt: skip
def test_unexpected_json_in_an_event_record_is_skipped_and_said(home: Home, body: bytes) -> None:
    _relayed_session(home)
    with home.loc.log_file.open("ab") as fh:
        fh.write(b"\0R\0=1\0=observed\0=" + body + b"\0\n")
    for args in (["log"], ["tree"], ["review"], ["report", "--session", S, "-o", "-"]):
        out = cli(home, *args, "--log-dir", str(home.loc.log_dir))
        assert out.returncode == 0, (args, out.stderr)
        assert "Traceback" not in out.stderr
        assert "exec.log@" in out.stderr and "skipped" in out.stderr, (args, out.stderr)


def test_exec_log_that_is_a_directory_is_an_input_error(home: Home) -> None:
    home.loc.log_file.mkdir(parents=True)  # as root, mode 000 stops nothing: a directory does
    for args in (["log"], ["tree"], ["review"], ["report", "-o", "-"], ["sessions"]):
        out = cli(home, *args, "--log-dir", str(home.loc.log_dir))
        one_error_line(out, "exec.log", "not a regular file")


def test_since_too_far_back(home: Home) -> None:
    eventlog.append_event(home.loc, "note", {"time": "2026-01-01T00:00:00Z"})
    out = cli(home, "log", "--log-dir", str(home.loc.log_dir), "--since", "99999999d")
    one_error_line(out, "--since", "99999999d")


@pytest.mark.parametrize("what", ["policy", "baseline", "lock"])
@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("version = 1\nx = " + "[" * 5000 + "]" * 5000 + "\n", ["nested too deeply"]),
        ("version = 1\na = " + "{b = " * 5000 + "1" + "}" * 5000 + "\n", ["nested too deeply"]),
        ("version = 1\n\nrecords = " + "7" * 5000 + "\n", [":3:", "number too long"]),
    ],
    ids=["array", "table", "digits"],
)
def test_policy_and_baseline_too_deep_or_too_long(
    home: Home, tmp_path: Path, what: str, text: str, words: list[str]
) -> None:
    f = tmp_path / f"{what}.toml"
    f.write_text(text)
    eventlog.append_event(home.loc, "note", {"time": "2026-01-01T00:00:00Z"})
    out = cli(home, "review", "--log-dir", str(home.loc.log_dir), f"--{what}", str(f))
    one_error_line(out, str(f), *words)


def test_unknown_keys_in_a_baseline_name_file_line_and_key(home: Home, tmp_path: Path) -> None:
    eventlog.append_event(home.loc, "note", {"time": "2026-01-01T00:00:00Z"})
    f = tmp_path / "base.toml"
    for text, line, key in [
        ("version = 1\nrecords = 3\nsesion = 'x'\n", 3, "sesion"),
        ("version = 1\n\n[commands.git]\ntargets = []\nshape = ['status']\n", 5,
         "commands.git.shape"),
    ]:  # fmt: skip
        f.write_text(text)
        out = cli(home, "review", "--log-dir", str(home.loc.log_dir), "--baseline", str(f))
        one_error_line(out, f"{f}:{line}:", f"baseline key {key}: unknown key")


def test_unknown_rule_in_policy_severity(home: Home, tmp_path: Path) -> None:
    eventlog.append_event(home.loc, "note", {"time": "2026-01-01T00:00:00Z"})
    f = tmp_path / "policy.toml"
    f.write_text("version = 1\n\n[severity]\nMCS101 = 'high'\nMCS199 = 'low'\n")
    out = cli(home, "review", "--log-dir", str(home.loc.log_dir), "--policy", str(f))
    one_error_line(out, f"{f}:5:", "policy key severity.MCS199", "no such rule")
    out = cli(home, "lint-path", "/usr/bin", "--policy", str(f))
    one_error_line(out, f"{f}:5:", "severity.MCS199")
    f.write_text("version = 1\n\n[severity]\nMCS101 = 'high'\nMCS201 = 'low'\n")  # both exist
    out = cli(home, "review", "--log-dir", str(home.loc.log_dir), "--policy", str(f))
    assert out.returncode == 0, out.stderr


def test_a_config_with_a_bom_wraps_and_undoes_exactly(home: Home, tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    raw = b'\xef\xbb\xbf{"mcpServers": {"a": {"command": "npx", "args": ["-y", "x"]}}}\n'
    path.write_bytes(raw)
    assert cli(home, "lint-path", "--config", str(path)).returncode == 1  # npx: MCS22x, medium
    out = cli(home, "wrap-config", str(path), "--all", "--dir", str(tmp_path / "shims"))
    assert out.returncode == 0, out.stderr
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert json.loads(path.read_bytes().decode("utf-8-sig"))["mcpServers"]["a"]["args"][0] == "run"
    assert cli(home, "wrap-config", str(path), "--undo").returncode == 0
    assert path.read_bytes() == raw


def test_a_lone_surrogate_in_config_args(home: Home, tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text('{"mcpServers": {"a": {\n  "command": "npx",\n  "args": ["ok", "\\udc80"]}}}')
    before = path.read_bytes()
    for args in (["wrap-config", str(path), "--all"], ["lint-path", "--config", str(path)]):
        out = cli(home, *args)
        one_error_line(out, f"{path}:3:", "lone surrogate (\\udc80)")
    assert path.read_bytes() == before


def test_event_reader_refuses_what_no_writer_writes() -> None:
    """The reader and the writer agree: everything the writer encodes reads back."""
    payload = {"session": "s", "pid": 3, "alive": [[3, None]], "deep": [[[[["x"]]]]], "n": 1.5}
    raw = eventlog.encode_event("observed", payload)
    [rec] = list(execlog.read_stream(io.BytesIO(raw), "t", None, []))
    assert isinstance(rec, execlog.EventRecord) and rec.data == payload
    with pytest.raises(ValueError):
        eventlog.encode_event("observed", {"n": float("nan")})
