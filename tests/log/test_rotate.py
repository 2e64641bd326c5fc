"""mcpshim log rotate: what it may delete, and how it fails when the log dir is unusable."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from io import BytesIO

from mcpshim.log import execlog
from tests.fixtures.home import Home, dash_path, install

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


RACE_LOOP = r"""
shim=$1 w=$2 n=$3
i=0
while [ "$i" -lt "$n" ]; do "$shim" "w$w" "$i" || exit 9; i=$((i + 1)); done
"""


def test_a_shim_makes_the_live_log_anew_when_rotation_renames_it_between_checks(
    home: Home, interpreter: str
) -> None:
    """A shim checks that exec.log exists, then that it is a regular file, then appends; a
    rotation between the checks left it with 'exec.log is not a regular file' and the record
    lost. Shells started by dash -c and bash -c run the shim while the log is renamed away
    and made anew 2 ms later, every 22 ms: every record is in some segment, and no shim
    complains."""
    install(home, ["true"], interpreter)
    home.loc.log_file.touch(mode=0o600)
    shim, each = str(home.loc.shim_dir / "true"), 300
    shells = [
        subprocess.Popen(
            [sh, "-c", RACE_LOOP, "loop", shim, str(w), str(each)],
            env=home.env,
            stderr=subprocess.PIPE,
        )
        for w, sh in enumerate(["dash", "bash", "dash", "bash"])
    ]
    live, n = home.loc.log_file, 0
    while any(p.poll() is None for p in shells):
        # rotate_locked's two steps, with the gap between them a loaded machine can give
        n += 1
        os.rename(live, live.with_name(f"exec.log.{n:06d}"))
        time.sleep(0.002)
        os.close(os.open(live, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        time.sleep(0.02)
    errs = [p.stderr.read().decode() if p.stderr else "" for p in shells]
    assert [p.wait() for p in shells] == [0] * len(shells) and errs == [""] * len(shells), errs
    got: dict[str, list[int]] = {}
    problems: list[execlog.LogProblem] = []
    for rec in execlog.iter_records(home.loc, problems):
        if isinstance(rec, execlog.ExecRecord):
            got.setdefault(rec.args[0].decode(), []).append(int(rec.args[1]))
    assert problems == []  # no record overwritten by a shim that made the file
    for w in range(4):
        seqs = sorted(got.get(f"w{w}", []))
        assert seqs == list(range(each)), (w, sorted(set(range(each)) - set(seqs)), len(seqs))


def test_the_live_log_never_goes_missing_while_it_rotates(home: Home) -> None:
    """A shim that found exec.log missing (between rotation's rename and the new file) made
    it with its caller's umask, 0644 under most. A dash loop looks for the live name while
    the log rotates 300 times: it is always there, and always 0600."""
    from mcpshim.log import rotation

    home.loc.log_dir.mkdir(parents=True, exist_ok=True)
    home.loc.log_file.touch(mode=0o600)
    stop = home.root / "stop"
    watch = subprocess.Popen(
        [dash_path(), "-c", 'while ! [ -e "$2" ]; do [ -e "$1" ] || echo gap; done',
         "watch", str(home.loc.log_file), str(stop)],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        for _ in range(300):
            with home.loc.log_file.open("ab") as fh:
                fh.write(b"x")
            rotation.rotate(home.loc)
    finally:
        stop.touch()
        out, _ = watch.communicate(timeout=30)
    assert out == b""
    assert home.loc.log_file.stat().st_mode & 0o777 == 0o600
    assert not (home.loc.log_dir / ".exec.log.new").exists()
    assert len(list(home.loc.log_dir.glob("exec.log.0*"))) == 300


def test_auto_under_max_size_names_the_defaults_once(home: Home) -> None:
    """No config file: "(defaults)", not "((defaults))" (issue 30 item 10)."""
    install(home, ["git"])
    subprocess.run([str(home.loc.shim_dir / "git"), "--version"], env=home.env, check=True,
                   capture_output=True)  # fmt: skip
    done = cli(home, "log", "rotate", "--auto", "--dir", str(home.loc.shim_dir))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "live log under max_size (defaults); not rotated\n"
