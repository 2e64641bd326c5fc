"""mcpshim log rotate: what it may delete, and how it fails when the log dir is unusable."""

from __future__ import annotations

import subprocess
import sys
from io import BytesIO

from conftest import Home, dash_path, install
from mcpshim.log import execlog

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPSHIM, *args], env=home.env, capture_output=True, text=True, timeout=300
    )


def test_rotate_keep_deletes_only_spill_files_a_valid_pointer_names(home: Home) -> None:
    install(home, ["true"], dash_path())
    # a real spill: a record over one write
    subprocess.run([str(home.loc.shim_dir / "true"), "x" * 9000], env=home.env, check=True)
    [real] = list(home.loc.spill_dir.iterdir())
    log_dir = home.loc.log_dir
    victims = [log_dir / "victim", log_dir.parent / "outside", home.loc.spill_dir / ".hidden"]
    for v in victims:
        v.write_text("keep me")
    forged = [
        b"../victim",
        b"../../outside",
        b".hidden",
        str(log_dir / "victim").encode(),
        b"..",
        b"sub/../../victim",
    ]
    with home.loc.log_file.open("ab") as fh:
        for name in forged:
            fh.write(b"\0P\0=1\0=" + name + b"\0\n")
    out = cli(home, "log")
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("spill pointer with a bad name") == len(forged)
    out = cli(home, "log", "rotate", "--keep", "0")
    assert out.returncode == 0, out.stderr
    assert "removed" in out.stdout
    for v in victims:
        assert v.read_text() == "keep me", v
    assert not real.exists()  # what a valid pointer named went with its segment


def test_spill_names_follow_the_reader(home: Home) -> None:
    """Rotation and the reader accept exactly the same pointers."""
    names = [b"boot.1.2.3.0", b"../x", b".x", b"a/b", b"", b"\xff", b"ok-name_1"]
    for name in names:
        body = b"\0P\0=1\0=" + name + b"\0\n"
        problems: list[execlog.LogProblem] = []
        recs = list(execlog.read_stream(BytesIO(body), "t", home.loc.spill_dir, problems))
        listed = list(execlog.spill_names(BytesIO(body)))
        bad_name = any("bad name" in p.message for p in problems)
        assert recs == []
        assert bool(listed) == (not bad_name), name
