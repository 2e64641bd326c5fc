"""wrap-config on real files: byte-exact undo, idempotence, comments, backups, atomic writes."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpshim.errors import InputError, UsageError
from mcpshim.pathcheck import jsonc
from mcpshim.pathcheck.clientconfig import load_config
from mcpshim.pathcheck.wrap import _verify, plan_wrap
from mcpshim.pathcheck.wrapfile import (
    LOCK_SUFFIX,
    _locked,
    apply_plan,
    backup_path,
    edit_lock,
    plan_undo,
    undo,
)
from tests.fixtures.home import CONFIGS, Home

FIXTURES = CONFIGS
RELS = [
    Path("claude-desktop/claude_desktop_config.json"),
    Path("claude-code/.mcp.json"),
    Path("cursor/.cursor/mcp.json"),
    Path("vscode/.vscode/mcp.json"),
]
SHIM = "/opt/mcpshim/shims"
EXE = "/usr/local/bin/mcpshim"
INHERITED = "/usr/local/bin:/usr/bin:/bin"


def copy(tmp_path: Path, rel: Path) -> Path:
    dest = tmp_path / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / rel, dest)
    dest.chmod(0o640)
    return dest


def wrap(path: Path, names: list[str] | None = None, explicit: bool = False) -> bool:
    cfg = load_config(path)
    plan = plan_wrap(cfg, names, SHIM, EXE, INHERITED, explicit_dir=explicit)
    apply_plan(plan, cfg)
    return plan.changed


@pytest.mark.parametrize("rel", RELS, ids=[r.parts[0] for r in RELS])
def test_wrap_all_then_undo_is_byte_identical(tmp_path: Path, rel: Path) -> None:
    path = copy(tmp_path, rel)
    original = path.read_bytes()
    before = load_config(path)
    assert wrap(path)
    after = load_config(path)
    assert backup_path(path).read_bytes() == original
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [c.text for c in after.document.comments] == [c.text for c in before.document.comments]
    for old in before.servers:
        new = after.server(old.name)
        if not old.stdio:
            assert new.node.value == old.node.value
            continue
        assert new.command == EXE
        assert list(new.args) == ["run", "--mcp", "--", old.command, *old.args]
        base = old.env.get("PATH", INHERITED)
        assert new.env["PATH"] == f"{SHIM}:{base}"
        assert {k: v for k, v in new.env.items() if k != "PATH"} == {
            k: v for k, v in old.env.items() if k != "PATH"
        }
        rest = {k: v for k, v in new.node.value.items() if k not in ("command", "args", "env")}
        assert rest == {
            k: v for k, v in old.node.value.items() if k not in ("command", "args", "env")
        }
    others = {k: v for k, v in after.document.root.value.items() if k != after.servers_key}
    assert others == {
        k: v for k, v in before.document.root.value.items() if k != before.servers_key
    }
    if after.client != "vscode":
        json.loads(path.read_text())  # still plain JSON for clients that require it
    undo(load_config(path))
    assert path.read_bytes() == original
    assert not backup_path(path).exists()


@pytest.mark.parametrize("rel", RELS, ids=[r.parts[0] for r in RELS])
def test_wrap_twice_is_a_no_op(tmp_path: Path, rel: Path) -> None:
    path = copy(tmp_path, rel)
    wrap(path)
    once, backup, mtime = path.read_bytes(), backup_path(path).read_bytes(), path.stat().st_mtime_ns
    assert wrap(path) is False
    assert path.read_bytes() == once and backup_path(path).read_bytes() == backup
    assert path.stat().st_mtime_ns == mtime  # not even rewritten


def test_vscode_comments_stay_on_their_lines(tmp_path: Path) -> None:
    path = copy(tmp_path, RELS[3])
    wrap(path)
    text = path.read_text()
    assert '"PERPLEXITY_API_KEY": "${input:perplexity-key}", // from the prompt above\n' in text
    assert "// pinned? no: fetched at start\n" in text
    line = next(x for x in text.splitlines() if "pinned?" in x)
    assert '"args": ["run", "--mcp", "--", "uvx", "mcp-server-fetch"]' in line


def test_explicit_shim_dir_is_passed_to_run(tmp_path: Path) -> None:
    path = copy(tmp_path, RELS[0])
    wrap(path, ["sqlite"], explicit=True)
    s = load_config(path).server("sqlite")
    assert list(s.args[:5]) == ["run", "--mcp", "--dir", SHIM, "--"]
    assert wrap(path, ["sqlite"], explicit=True) is False


@pytest.mark.parametrize("explicit", [False, True])
def test_no_mcp_records_execs_only(tmp_path: Path, explicit: bool) -> None:
    path = copy(tmp_path, RELS[0])
    cfg = load_config(path)
    apply_plan(plan_wrap(cfg, ["sqlite"], SHIM, EXE, INHERITED, explicit, mcp=False), cfg)
    s = load_config(path).server("sqlite")
    want = ["run", *(["--dir", SHIM] if explicit else []), "--", "/usr/local/bin/uvx"]
    assert list(s.args[: len(want)]) == want
    undo(load_config(path))
    assert path.read_bytes() == (FIXTURES / RELS[0]).read_bytes()


@pytest.mark.parametrize(
    ("entry", "expect"),
    [
        (
            '{"command": "a"}',
            '{"command": "/usr/local/bin/mcpshim", "args": ["run", "--mcp", "--", "a"]',
        ),
        ('{"command": "a", "args": []}', '"args": ["run", "--mcp", "--", "a"]'),
        ('{"command": "a", "args": [/* none */]}', '"args": ["run", "--mcp", "--", "a"/* none */]'),
        ('{"command": "a", "env": {}}', '"env": {"PATH": "/opt/mcpshim/shims:'),
        ('{"command": "a", "env": {"PATH": "/x"}}', '"env": {"PATH": "/opt/mcpshim/shims:/x"}'),
        (
            '{"command": "a", "env": {"PATH": "/opt/mcpshim/shims:/x"}}',
            '"PATH": "/opt/mcpshim/shims:/x"}',
        ),
    ],
)
def test_inline_entries(tmp_path: Path, entry: str, expect: str) -> None:
    path = tmp_path / ".vscode" / "mcp.json"
    path.parent.mkdir()
    original = '{"servers": {"s": ' + entry + "}}\n"
    path.write_text(original)
    wrap(path)
    text = path.read_text()
    assert expect in text, text
    s = load_config(path).server("s")
    assert s.command == EXE and s.env["PATH"].startswith(SHIM + ":")
    undo(load_config(path))
    assert path.read_text() == original


def test_crlf_and_unicode_survive(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    lines = ["{", '  "mcpServers": {', '    "ü": {', '      "command": "/opt/séver"', "    }"]
    original = "\r\n".join([*lines, "  }", "}", ""]).encode()
    path.write_bytes(original)
    wrap(path)
    new = path.read_bytes()
    assert b"\n" not in new.replace(b"\r\n", b"")  # every newline is still CRLF
    assert load_config(path).server("ü").args == ("run", "--mcp", "--", "/opt/séver")
    undo(load_config(path))
    assert path.read_bytes() == original


def test_partial_wraps_keep_the_first_original(tmp_path: Path) -> None:
    path = copy(tmp_path, RELS[0])
    original = path.read_bytes()
    wrap(path, ["github"])
    assert load_config(path).server("filesystem").command == "npx"
    wrap(path, ["filesystem"])
    assert backup_path(path).read_bytes() == original
    undo(load_config(path))
    assert path.read_bytes() == original


def test_stale_backup_is_never_overwritten(tmp_path: Path) -> None:
    path = copy(tmp_path, RELS[0])
    stale = b'{"mcpServers": {"old": {"command": "x"}}}'
    backup_path(path).write_bytes(stale)
    with pytest.raises(InputError, match="already holds a different original"):
        wrap(path)
    assert backup_path(path).read_bytes() == stale
    assert path.read_bytes() == (FIXTURES / RELS[0]).read_bytes()


def test_undo_refuses_to_drop_later_edits(tmp_path: Path) -> None:
    path = copy(tmp_path, RELS[0])
    wrap(path)
    edited = path.read_text().replace('"Alt+Space"', '"Ctrl+Space"')
    path.write_text(edited)
    with pytest.raises(InputError, match="changed beyond the wrapping"):
        plan_undo(load_config(path))
    assert path.read_text() == edited


def test_undo_without_backup(tmp_path: Path) -> None:
    path = copy(tmp_path, RELS[1])
    with pytest.raises(InputError, match="no backup"):
        undo(load_config(path))


def test_remote_server_cannot_be_wrapped(tmp_path: Path) -> None:
    path = copy(tmp_path, RELS[1])
    with pytest.raises(UsageError, match="not a stdio server"):
        plan_wrap(load_config(path), ["sentry"], SHIM, EXE, INHERITED)


def test_symlinked_config_is_written_through(tmp_path: Path) -> None:
    real = copy(tmp_path, RELS[0])
    link = tmp_path / "dotfiles-link.json"
    os.symlink(real, link)
    cfg = load_config(link)
    apply_plan(plan_wrap(cfg, None, SHIM, EXE, INHERITED), cfg)
    assert link.is_symlink()
    assert load_config(real).server("sqlite").command == EXE


def test_duplicate_keys_edit_the_member_json_readers_use(tmp_path: Path) -> None:
    """A duplicate key: the parser edits the member JSON readers use, and verifies it."""
    path = tmp_path / "claude_desktop_config.json"
    path.write_text('{"mcpServers": {"s": {"command": "a", "command": "b"}}}')
    cfg = load_config(path)
    plan = plan_wrap(cfg, None, SHIM, EXE, INHERITED)
    doc = jsonc.parse(plan.new.decode())
    assert doc.root.value["mcpServers"]["s"]["args"] == ["run", "--mcp", "--", "b"]


@pytest.mark.parametrize("style", ["compact", "indent4", "tabs", "spaced"])
@pytest.mark.parametrize("rel", RELS[:3], ids=[r.parts[0] for r in RELS[:3]])
def test_any_formatting_wraps_and_undoes(tmp_path: Path, rel: Path, style: str) -> None:
    value = json.loads((FIXTURES / rel).read_text())
    text = {
        "compact": json.dumps(value, separators=(",", ":")),
        "indent4": json.dumps(value, indent=4),
        "tabs": json.dumps(value, indent="\t"),
        "spaced": json.dumps(value, indent=1, separators=(" , ", " : ")),
    }[style]
    path = tmp_path / rel
    path.parent.mkdir(parents=True)
    path.write_text(text)
    wrap(path)
    wrapped = json.loads(path.read_text())  # still plain JSON
    for name, entry in value["mcpServers"].items():
        got = wrapped["mcpServers"][name]
        if "command" in entry:
            assert got["args"][3:] == [entry["command"], *entry.get("args", [])]
        else:
            assert got == entry
    undo(load_config(path))
    assert path.read_text() == text


def test_edit_check_refuses_to_drop_a_comment(tmp_path: Path) -> None:
    """The safety net under every edit: re-parse, compare values and comments, or refuse."""
    path = tmp_path / ".vscode" / "mcp.json"
    path.parent.mkdir()
    path.write_text('{"servers": {"s": {"command": "a"}}} // keep me\n')
    cfg = load_config(path)
    value = cfg.document.root.value
    with pytest.raises(InputError, match="drop or move comments"):
        _verify(cfg, '{"servers": {"s": {"command": "a"}}}\n', value)
    with pytest.raises(InputError, match="change other values"):
        _verify(cfg, '{"servers": {"s": {"command": "b"}}} // keep me\n', value)
    _verify(cfg, cfg.document.text, value)  # the unchanged text passes


def test_a_server_named_twice_is_wrapped_once(tmp_path: Path) -> None:
    path = copy(tmp_path, RELS[0])
    assert wrap(path, ["sqlite", "sqlite"])
    assert load_config(path).server("sqlite").args[:4] == (
        "run",
        "--mcp",
        "--",
        "/usr/local/bin/uvx",
    )


def test_wrap_then_undo_leaves_the_directory_as_it_was(home: Home, tmp_path: Path) -> None:
    """Through the CLI, as a user runs it: after --undo neither backup nor a zero-byte
    FILE.mcpshim-lock is left beside the config (issue 30 item 10)."""
    path = copy(tmp_path, RELS[0])
    before = sorted(p.name for p in path.parent.iterdir())
    base = [sys.executable, "-m", "mcpshim", "wrap-config", str(path)]
    for extra in (["--all", "--dir", SHIM], ["--undo"]):
        done = subprocess.run([*base, *extra], env=home.env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert not (tmp_path / RELS[0]).with_name(path.name + LOCK_SUFFIX).exists()
    assert sorted(p.name for p in path.parent.iterdir()) == before
    assert path.read_bytes() == (FIXTURES / RELS[0]).read_bytes()


def test_a_waiter_on_a_removed_lock_file_locks_the_new_one(tmp_path: Path) -> None:
    """The holder removes the lock file; one who opened it before and waited must not
    think it holds the lock while a newcomer holds the new file."""
    import fcntl
    import threading

    path = tmp_path / "c.json"
    path.write_text("{}")
    lock = path.with_name(path.name + LOCK_SUFFIX)
    inside: list[str] = []
    with edit_lock(path):
        stale = os.open(lock, os.O_RDWR)  # a waiter's open, before the holder lets go
        got: list[int] = []
        t = threading.Thread(target=lambda: got.append(_locked(lock, time.monotonic() + 10)))
        t.start()
        time.sleep(0.1)
        assert not got  # still waiting
        inside.append("first")
    t.join(10)
    [fd] = got
    assert os.fstat(fd).st_ino == os.stat(lock).st_ino != os.fstat(stale).st_ino
    with pytest.raises(BlockingIOError):  # the new file is held: a third party waits
        other = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    os.close(fd)
    os.close(stale)
