"""Bounded logs: [log] max_size, keep, max_total in the user's config file, applied by
`log rotate --auto` and by `run`; every drop said in a `log-dropped` record first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpshim.errors import InputError
from mcpshim.log import execlog, retention
from mcpshim.paths import config_file
from tests.fixtures import sealhelp
from tests.fixtures.home import Home, dash_path, install
from tests.fixtures.runhelp import run

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def _cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPSHIM, *args], env=home.env, capture_output=True, text=True, timeout=120
    )


def _config(text: str) -> Path:
    path = config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _segments(home: Home) -> list[str]:
    return [p.name for p in execlog.segments(home.loc)]


def _dropped(home: Home) -> list[dict[str, Any]]:
    return [dict(r.data) for r in home.records() if isinstance(r, execlog.EventRecord)
            if r.kind == "log-dropped"]  # fmt: skip


def _fill(home: Home, segments: int, session: str = "S-ret") -> None:
    """Rotated segments of real shim records (one with a spill file each), then a live log."""
    shim = home.loc.shim_dir / "true"
    big = "x" * 9000
    for i in range(segments + 1):
        env = {**home.env, "MCPSHIM_SESSION": f"{session}-{i}"}
        subprocess.run(["dash", "-c", f'"{shim}" a; "{shim}" {big}'], env=env, check=True)
        if i < segments:
            assert _cli(home, "log", "rotate").returncode == 0


def test_settings_from_the_config_file(home: Home) -> None:
    assert retention.load_settings() == retention.LogSettings()  # no file: the defaults
    path = _config('[log]\nmax_size = "1.5 MiB"\nkeep = 3\nmax_total = false\n')
    got = retention.load_settings()
    assert (got.max_size, got.keep, got.max_total) == (1536 * 1024, 3, None)
    assert got.source == str(path)
    for bad, said in (
        ('[log]\nmax_size = "lots"\n', "max_size: not a size"),
        ("[log]\nkeep = -1\n", "keep:"),
        ("[log]\nkeeep = 1\n", "unknown key(s) keeep"),
        ("[log\n", "not a valid config file"),
    ):
        _config(bad)
        with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)")):
            retention.load_settings()
    done = _cli(home, "log", "rotate", "--auto")
    assert done.returncode == 2 and done.stderr.startswith("mcpshim: error: ")
    assert "Traceback" not in done.stderr


def test_auto_rotates_at_max_size_and_keeps_n(home: Home) -> None:
    install(home, ["true"], dash_path())
    _fill(home, 4)
    assert len(_segments(home)) == 5
    spills = {}
    for name in _segments(home):
        with open(home.loc.log_dir / name, "rb") as fh:
            spills[name] = set(execlog.spill_names(fh))
    assert all(spills.values())
    _config("[log]\nmax_size = 0\nkeep = 2\nmax_total = false\n")
    done = _cli(home, "log", "rotate", "--auto")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("removed") == 3 and "rotated to" in done.stdout
    assert _segments(home) == ["exec.log.000004", "exec.log.000005", "exec.log"]
    kept = spills["exec.log.000004"] | spills["exec.log"]  # the live log is now 000005
    assert {p.name for p in home.loc.spill_dir.iterdir()} == kept  # the dropped ones' went
    drops = _dropped(home)
    assert [d["segment"] for d in drops] == ["exec.log.000001", "exec.log.000002",
                                              "exec.log.000003"]  # fmt: skip
    for i, d in enumerate(drops):
        assert d["rule"] == "keep 2" and d["reviewed"] is False
        assert d["reasons"] == ["not reviewed"]
        assert d["sessions"] == [f"S-ret-{i}"] and d["records"] == 2
        assert d["size"] > 0 and d["first"] <= d["last"]
    # under max_size: nothing rotated, nothing dropped
    _config('[log]\nmax_size = "1G"\nkeep = 2\n')
    done = _cli(home, "log", "rotate", "--auto")
    assert "not rotated" in done.stdout and "removed" not in done.stdout


def test_reviewed_segments_are_said_so_and_unreviewed_ones_can_be_kept(home: Home) -> None:
    install(home, ["true"], dash_path())
    _fill(home, 3)
    assert _cli(home, "review", "--fail-on", "high").returncode == 0  # reads every segment
    _fill(home, 2, session="S-late")  # two more segments no review read
    _config("[log]\nmax_size = false\nkeep = 1\nmax_total = false\ndrop_unreviewed = false\n")
    done = _cli(home, "log", "rotate", "--auto")
    assert done.returncode == 0, done.stderr
    # the three reviewed ones go (said reviewed); the two the review did not read all of
    # (the live log then, grown since, and one after it) stay, over the limit
    assert [(d["segment"], d["reviewed"], d["reasons"]) for d in _dropped(home)] == [
        (f"exec.log.00000{i}", True, []) for i in (1, 2, 3)
    ]
    assert "kept" in done.stdout and "not reviewed" in done.stdout
    assert _segments(home) == ["exec.log.000004", "exec.log.000005", "exec.log"]


def test_max_total_drops_the_oldest_until_under(home: Home) -> None:
    install(home, ["true"], dash_path())
    _fill(home, 4)
    total = sum((home.loc.log_dir / n).stat().st_size for n in _segments(home))
    total += sum(p.stat().st_size for p in home.loc.spill_dir.iterdir())
    each = total // 5
    _config(f"[log]\nmax_size = false\nkeep = false\nmax_total = {each * 3}\n")
    assert _cli(home, "log", "rotate", "--auto").returncode == 0
    assert [d["rule"] for d in _dropped(home)] == [f"max_total {each * 3}"] * 2
    assert len(_segments(home)) == 3


def test_run_applies_the_limits(home: Home) -> None:
    install(home, ["true"], dash_path())
    _fill(home, 3)
    _config("[log]\nmax_size = 1\nkeep = 1\nmax_total = false\n")
    res = run(home, ["sh", "-c", "true a; true b"], capture_output=True)
    assert res.returncode == 0, res.stderr
    # at the end of the session: the live log rotated (over 1 byte), all but one dropped
    assert len(_segments(home)) == 2
    assert len(_dropped(home)) == 3
    listed = _cli(home, "sessions", "--format", "json")
    assert listed.returncode == 0 and "S-ret-0" not in listed.stdout  # dropped with it


def test_size_watch_rotates_mid_session(home: Home) -> None:
    install(home, ["true"], dash_path())
    _fill(home, 0)
    watch = retention.SizeWatch(home.loc, max_size=100, every=0.0)
    watch()
    assert _segments(home) == ["exec.log.000001", "exec.log"]
    watch()  # the live log is empty now: nothing more
    assert _segments(home) == ["exec.log.000001", "exec.log"]


def test_a_broken_config_never_stops_run(home: Home) -> None:
    install(home, ["true"], dash_path())
    _config("[log\n")
    res = run(home, ["true"], capture_output=True)
    assert res.returncode == 0
    assert b"not a valid config file" in res.stderr and b"defaults" in res.stderr


def test_a_sealed_log_says_which_dropped_segments_seals_covered(home: Home) -> None:
    install(home, ["true"], dash_path())
    _fill(home, 1)
    sealhelp.init(home, "--no-anchor")  # sealing starts: what is there gets sealed
    sealhelp.seal(home)
    _fill(home, 1, session="S-unsealed")  # then more, no seal since
    _config("[log]\nmax_size = false\nkeep = 0\nmax_total = false\n")
    assert _cli(home, "log", "rotate", "--auto").returncode == 0
    drops = {d["segment"]: d for d in _dropped(home)}
    assert drops["exec.log.000001"]["sealed"] is True
    assert drops["exec.log.000002"]["sealed"] is False
    assert "not sealed" in drops["exec.log.000002"]["reasons"]
    assert "not sealed" not in drops["exec.log.000001"]["reasons"]
    # and verify tells pruning from deletion: the seals that went are noted
    notes = [r for r in home.records() if isinstance(r, execlog.EventRecord)]
    assert [r.kind for r in notes if r.kind == "segments-removed"] == ["segments-removed"]
