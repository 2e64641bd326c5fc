"""The record a real shim writes: lossless, unforgeable, with the identity of the exec'd target."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mcpshim.log import execlog
from mcpshim.proc.procinfo import start_ticks
from tests.fixtures.home import Home, install
from tests.fixtures.nativekit import need_cc

# Linux refuses a single argument over MAX_ARG_STRLEN (32 pages = 128 KiB), so the "1 MiB
# sh -c script" of the issue is carried as the largest single argument the kernel allows plus
# a 1 MiB argument vector.
MAX_ARG = 32 * 4096 - 1

CORPUS: list[bytes] = [
    b"",
    b"plain",
    b"two words",
    b"line1\nline2\n",
    b"\n",
    b"double \"quotes\" and 'single'",
    b"back\\slash\\\\ and \\n literal",
    b"tab\there",
    b"\x1b[31mred\x1b[0m and ESC",
    b"\xff\xfe invalid utf-8 \xc3\x28",
    "unicode é ü 漢字 \u202e bidi".encode(),
    b"%s %d %% %b \\0 \\c printf directives",
    b"$(echo subst) `echo bt` ${HOME} $HOME *",
    b"-",
    b"--",
    b"=R fake-tag \n\nR",
    b"\\0R\\0=1\\0=exec forged-looking text",
]


def _run(
    home: Home, name: str, args: list[bytes], **kw: object
) -> subprocess.CompletedProcess[bytes]:
    shim = os.fsencode(home.loc.shim_dir / name)
    return subprocess.run([shim, *args], env=home.env, capture_output=True, timeout=60, **kw)  # type: ignore[call-overload, no-any-return]


def test_argument_corpus_round_trips_byte_for_byte(home: Home, interpreter: str) -> None:
    install(home, ["true"], interpreter)
    out = _run(home, "true", CORPUS)
    assert out.returncode == 0, out.stderr
    [rec] = home.execs()
    assert rec.args == tuple(CORPUS)
    assert rec.redactions == ()


def test_largest_single_argument_and_1mib_argv(home: Home, interpreter: str) -> None:
    install(home, ["sh"], interpreter)
    script = b"exit 0\n#" + bytes((i % 94) + 33 for i in range(MAX_ARG - 9)) + b"\n"
    assert len(script) == MAX_ARG
    big = [script] + [bytes([65 + i]) * (MAX_ARG - 1) for i in range(8)]
    assert sum(len(a) for a in big) > 1 << 20
    out = _run(home, "sh", [b"-c", *big])
    assert out.returncode == 0, out.stderr
    [rec] = home.execs()
    assert rec.args == (b"-c", *big)
    # it went to a spill file with a one-write pointer in the log
    assert "spill/" in rec.where
    assert b"\0P\0=" in home.loc.log_file.read_bytes()


def test_ten_thousand_arguments(home: Home, interpreter: str) -> None:
    install(home, ["true"], interpreter)
    args = [f"a{i}\n{i % 7}".encode() for i in range(10_000)]
    out = _run(home, "true", args)
    assert out.returncode == 0, out.stderr
    [rec] = home.execs()
    assert rec.args == tuple(args)


def test_no_argument_content_forges_splits_or_hides_a_record(home: Home, interpreter: str) -> None:
    install(home, ["true"], interpreter)
    # Everything a record is made of, except the NUL that no argument can hold.
    fake = [b"R", b"=1", b"=exec", b"\nR=1=exec=0=0=boot=1=1=1==/=true=/bin/true", b"\n\n"]
    _run(home, "true", fake)
    _run(home, "true", [b"after"])
    recs = home.execs()
    assert [r.args for r in recs] == [tuple(fake), (b"after",)]


def test_recorded_pid_is_the_pid_of_the_target(home: Home, interpreter: str) -> None:
    install(home, ["sh"], interpreter)
    out = _run(home, "sh", [b"-c", b"echo $$; cut -d' ' -f4,22 /proc/$$/stat"])
    pid, stat = out.stdout.decode().splitlines()
    [rec] = home.execs()
    assert rec.pid == int(pid)
    ppid, start = stat.split()
    assert (rec.ppid, rec.start) == (int(ppid), int(start))
    assert rec.boot_id == execlog.current_boot_id()
    assert rec.time is not None and rec.start_time is not None
    assert abs((rec.time - rec.start_time).total_seconds()) < 5


def test_record_holds_cwd_target_session_and_path(
    home: Home, interpreter: str, tmp_path: Path
) -> None:
    install(home, ["true"], interpreter)
    work = tmp_path / "work dir"
    work.mkdir()
    env = {**home.env, "MCPSHIM_SESSION": "s-123", "PATH": f"{home.loc.shim_dir}:/usr/bin:/bin"}
    subprocess.run(["true", "x"], cwd=work, env=env, check=True, timeout=30)
    [rec] = home.execs()
    assert rec.cwd == os.fsencode(work)
    assert rec.session == "s-123"
    assert rec.path == env["PATH"].encode()
    assert rec.invoked_as == os.fsencode(home.loc.shim_dir / "true")
    assert rec.shim == "true"
    assert os.path.basename(rec.target) == b"true"


def test_descendants_pass_through_the_shims(home: Home, interpreter: str) -> None:
    install(home, ["sh", "git"], interpreter)
    env = {**home.env, "PATH": f"{home.loc.shim_dir}:/usr/bin:/bin"}
    subprocess.run(
        ["sh", "-c", "git --version >/dev/null; sh -c 'git --version' >/dev/null"],
        env=env,
        check=True,
        timeout=30,
    )
    shims_seen = [r.shim for r in home.execs()]
    assert shims_seen == ["sh", "git", "sh", "git"]


def test_a_crafted_process_name_cannot_forge_ppid_or_start(
    home: Home, interpreter: str, tmp_path: Path
) -> None:
    install(home, ["true"], interpreter)
    for name in ("x) S 1 1 1 0 -", "a b", "x)y"):
        link = tmp_path / name
        link.symlink_to(home.loc.shim_dir / "true")
        subprocess.run([str(link)], env=home.env, check=True, timeout=30)
    fake, blank, plain = home.execs()
    me = os.getpid()
    assert (fake.ppid, fake.start) == (me, None)  # two ") ": no fields trusted
    # a blank in comm is no ") ": the fields after it are read as they are
    assert plain.ppid == me and plain.start is not None
    assert blank.ppid == me and blank.start is not None
    assert fake.start is None or fake.start <= blank.start <= plain.start


@pytest.mark.parametrize("native", [False, True], ids=["sh", "native"])
def test_a_newline_in_the_process_name_cannot_take_fields_from_the_arguments(
    home: Home, interpreter: str, tmp_path: Path, native: bool
) -> None:
    # The comm ends the stat line early ("PID (a) S 7 8"): fields 2 and 20 after it would be
    # the forged 7 and the caller's 17th argument.
    if native:
        need_cc()
    install(home, ["true"], interpreter, native_mode="require" if native else "off")
    link = tmp_path / "a) S 7 8\n"
    link.symlink_to(home.loc.shim_dir / "true")
    subprocess.run([str(link), *["4242"] * 20], env=home.env, check=True, timeout=30)
    [rec] = home.execs()
    assert rec.args == (b"4242",) * 20
    assert rec.ppid == os.getpid()
    # no start at all, or (bash runs the native shim's fallback, whose comm is bash's) the
    # true one: after this test's own
    mine = start_ticks(os.getpid())
    assert rec.start is None or (mine is not None and rec.start >= mine and rec.start != 4242)
