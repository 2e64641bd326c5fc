"""Every file a command writes goes through one writer (base.safewrite): never through a
symlink someone planted where the file goes, whole or not at all, the old file intact when
the new one cannot be written (a full disk, `ulimit -f`), no temporary file left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpshim.log import eventlog
from tests.fixtures.disk import fill, small_tmpfs
from tests.fixtures.home import Home, install

MCPSHIM = [sys.executable, "-m", "mcpshim"]
S = "S-write"
VICTIM = b"the victim's own bytes\n"
OLD = b"the report as it was\n"


def cli(
    home: Home, *args: str, shell: str = "", stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """The CLI; with `shell`, started by bash after that line (`ulimit -f 4`)."""
    where = ["--log-dir", str(home.loc.log_dir)]
    argv = (
        [*MCPSHIM, *args[:1], *where, *args[1:]] if args[0] == "log" else [*MCPSHIM, *args, *where]
    )
    env = home.env
    if shell:
        argv = ["bash", "-c", f'{shell}; exec "$@"', "bash", *argv]
        # (unmeasured by `make coverage`: its data file is no file of the command's)
        env = {k: v for k, v in env.items() if not k.startswith("COV")}
    return subprocess.run(argv, env=env, input=stdin, capture_output=True, text=True, timeout=120)


@pytest.fixture
def relayed(home: Home) -> Home:
    """A small relayed session, as `run --mcp` writes it, for report to find."""
    t = "2026-11-30T21:03:05.000000+00:00"
    eventlog.append_event(home.loc, "mcp-session", {"session": S, "time": t})
    start = {"session": S, "time": t, "child_pid": 9, "command": ["x"]}
    eventlog.append_event(home.loc, "session-start", start)
    req = {"session": S, "time": t, "direction": "client->server", "id": 1}
    call = {**req, "method": "tools/call", "tool": "t", "arguments": {}}
    eventlog.append_event(home.loc, "mcp-request", call)
    resp = {"session": S, "time": t, "direction": "server->client", "id": 1, "is_error": False}
    eventlog.append_event(home.loc, "mcp-response", resp)
    return home


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, "256k") as d:
        yield d


def _refused(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("mcpshim: error: "), out.stderr
    for w in words:
        assert w in out.stderr, out.stderr


def _victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.write_bytes(VICTIM)
    return v


def _left(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_report_is_never_written_through_a_symlink(relayed: Home, tmp_path: Path, fmt: str) -> None:
    victim = _victim(tmp_path)
    out_file = tmp_path / "work" / f"report.{fmt}"
    out_file.parent.mkdir()
    out_file.symlink_to(victim)
    _refused(cli(relayed, "report", "--format", fmt, "-o", str(out_file)), "is a symlink")
    assert victim.read_bytes() == VICTIM and out_file.is_symlink()
    assert _left(out_file.parent) == []


def test_report_all_refuses_a_symlinked_index_and_a_symlinked_dir(
    relayed: Home, tmp_path: Path
) -> None:
    victim = _victim(tmp_path)
    out_dir = tmp_path / "pages"
    out_dir.mkdir()
    (out_dir / "index.html").symlink_to(victim)
    _refused(cli(relayed, "report", "--all", "-o", str(out_dir)), "index.html", "is a symlink")
    assert victim.read_bytes() == VICTIM
    assert _left(out_dir) == []
    # the directory itself a symlink: nothing is written where it points
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "linked-pages"
    link.symlink_to(elsewhere)
    _refused(cli(relayed, "report", "--all", "-o", str(link)), "is a symlink")
    assert list(elsewhere.iterdir()) == []
    # a real directory: every page and the index
    done = cli(relayed, "report", "--all", "-o", str(tmp_path / "real"))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["S-write.html", "index.html"]


def test_a_full_disk_keeps_the_old_report_and_leaves_no_temporary_file(
    relayed: Home, tmpfs: Path
) -> None:
    report = tmpfs / "report.html"
    report.write_bytes(OLD)
    fill(tmpfs)
    _refused(cli(relayed, "report", "-o", str(report)), "report.html", "No space left")
    assert report.read_bytes() == OLD
    assert sorted(os.listdir(tmpfs)) == ["filler", "report.html"]


def test_a_file_size_limit_keeps_the_old_report(relayed: Home, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    report.write_bytes(OLD)
    # ulimit -f 4: files up to 4 KiB (the log's own writes fit; the report does not)
    _refused(cli(relayed, "report", "-o", str(report), shell="ulimit -f 4"), "report.html")
    assert report.read_bytes() == OLD
    assert _left(tmp_path) == []
    md = tmp_path / "report.md"
    md.write_bytes(OLD)
    out = cli(relayed, "report", "--format", "md", "-o", str(md), shell="ulimit -f 1")
    _refused(out, "report.md")
    assert md.read_bytes() == OLD and _left(tmp_path) == []


def test_baseline_save_on_a_full_disk_leaves_the_old_one_and_no_temporary_file(
    home: Home, tmpfs: Path
) -> None:
    install(home, ["true"])
    subprocess.run(
        [str(home.loc.shim_dir / "true"), "x"], env={**home.env, "MCPSHIM_SESSION": S}, check=True
    )
    base = tmpfs / "b.toml"
    base.write_bytes(OLD)
    fill(tmpfs)
    out = cli(home, "baseline", "save", "--session", S, "-o", str(base))
    _refused(out, "b.toml", "No space left")
    assert base.read_bytes() == OLD
    assert sorted(os.listdir(tmpfs)) == ["b.toml", "filler"]


def test_baseline_save_and_policy_init_refuse_a_symlink(home: Home, tmp_path: Path) -> None:
    install(home, ["true"])
    subprocess.run(
        [str(home.loc.shim_dir / "true"), "x"], env={**home.env, "MCPSHIM_SESSION": S}, check=True
    )
    victim = _victim(tmp_path)
    link = tmp_path / "out.toml"
    link.symlink_to(victim)
    _refused(cli(home, "baseline", "save", "--session", S, "-o", str(link)), "is a symlink")
    for extra in ([], ["--force"]):
        out = subprocess.run(
            [*MCPSHIM, "policy", "init", "-o", str(link), *extra],
            env=home.env,
            capture_output=True,
            text=True,
            check=False,
        )
        _refused(out, "is a symlink")
    assert victim.read_bytes() == VICTIM and link.is_symlink()


def test_a_verifier_that_cannot_be_written_is_shown_not_lost(home: Home, tmpfs: Path) -> None:
    install(home, ["true"])
    out_file = tmpfs / "verifier"
    fill(tmpfs)
    done = cli(home, "log", "seal", "--init", "--no-anchor", "--verifier-out", str(out_file))
    assert done.returncode == 0, done.stderr
    assert "cannot write the verifier" in done.stderr and "No space left" in done.stderr
    verifier = done.stdout.strip()
    assert verifier.startswith("mcpshim-verifier-1:")
    assert not out_file.exists()
    checked = cli(home, "log", "verify", "--key", "-", stdin=verifier)
    assert checked.returncode == 0, checked.stdout + checked.stderr
