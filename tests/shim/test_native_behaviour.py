"""The native shim behaves like its target and like the sh shim when the log cannot be
written: run from Python, `dash -c` and `bash -c`, with the log dir missing, a file, a FIFO,
or on a full file system (a small tmpfs: as root chmod 000 stops nothing)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fixtures.home import dash_path
from tests.fixtures.nativekit import Pair, log_size, make_pair, need_cc, raw_records, run, shell

SH = dash_path


@pytest.fixture(params=["run", "refuse"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Pair:
    need_cc()
    targets = {n: shutil.which(n) or "" for n in ("sh", "cat", "env", "sleep", "true")}
    targets["sh"] = SH()
    return make_pair(tmp_path / "homes", targets, on_failure=request.param)


def _missing(p: Pair, which: str) -> None:
    shutil.rmtree(p.home(which).loc.log_dir)


def _a_file(p: Pair, which: str) -> None:
    d = p.home(which).loc.log_dir
    shutil.rmtree(d)
    d.write_text("not a directory\n")


def _fifo_dir(p: Pair, which: str) -> None:
    d = p.home(which).loc.log_dir
    shutil.rmtree(d)
    os.mkfifo(d)


def _fifo_log(p: Pair, which: str) -> None:
    log = p.home(which).loc.log_file
    log.unlink()
    os.mkfifo(log, 0o600)


BREAKERS: dict[str, Callable[[Pair, str], None]] = {
    "missing": _missing,
    "a-file": _a_file,
    "a-fifo": _fifo_dir,
    "log-a-fifo": _fifo_log,
}
LAUNCHERS = {
    "python": [],
    "dash": ["dash", "-c", '"$@"', "sh"],
    "bash": ["bash", "-c", '"$@"', "sh"],
}


def _launcher(name: str) -> list[str]:
    lst = LAUNCHERS[name]
    return [shell(lst[0]), *lst[1:]] if lst else []


def _outcome(p: Pair, which: str, launcher: list[str], tmp: Path) -> tuple[int, bytes, bool]:
    marker = tmp / f"ran-{which}"
    marker.unlink(missing_ok=True)
    link = p.link("sh", which)
    env = {"PATH": "/usr/bin:/bin"}
    done = run([*launcher, link, "-c", f"touch '{marker}'"], env, stdin=subprocess.DEVNULL)
    # the paths differ between the two homes: compare the message with them taken out
    msg = done.stderr.replace(os.fsencode(p.home(which).root), b"HOME")
    return done.returncode, msg, marker.exists()


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
@pytest.mark.parametrize("breaker", sorted(BREAKERS))
def test_a_log_that_cannot_be_written_ends_as_the_sh_shim_ends(
    pair: Pair, tmp_path: Path, breaker: str, launcher: str
) -> None:
    got = {}
    for which in ("sh", "native"):
        BREAKERS[breaker](pair, which)
        got[which] = _outcome(pair, which, _launcher(launcher), tmp_path)
    assert got["native"] == got["sh"]
    code, msg, ran = got["native"]
    refuse = pair.nat.loc.shim_dir.joinpath("manifest.toml").read_text().count('"refuse"')
    assert (code, ran) == ((126, False) if refuse else (0, True))
    assert msg.count(b"\n") == 1 and msg.startswith(b"mcpshim: ")


@contextlib.contextmanager
def _tmpfs(where: Path, size: str = "64k") -> Iterator[Path]:
    where.mkdir(parents=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the full-disk test: {done.stderr.decode().strip()}")
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_a_full_file_system_ends_as_the_sh_shim_ends(
    pair: Pair, tmp_path: Path, launcher: str
) -> None:
    on_failure = (
        "refuse" if '"refuse"' in (pair.nat.loc.shim_dir / "manifest.toml").read_text() else "run"
    )
    targets = {"sh": SH()}
    with _tmpfs(tmp_path / "mnt", "1m") as mnt:
        full = make_pair(mnt / "homes", targets, on_failure=on_failure)
        fill = mnt / "fill"
        fd = os.open(fill, os.O_WRONLY | os.O_CREAT, 0o600)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"x" * 512)
        os.close(fd)
        got = {w: _outcome(full, w, _launcher(launcher), tmp_path) for w in ("sh", "native")}
        assert got["native"] == got["sh"]
        assert got["native"][1].count(b"\n") == 1
        assert got["native"][2] == (on_failure == "run")
        fill.unlink()
        # and with room again, both record
        for which in ("sh", "native"):
            size = log_size(full.home(which))
            assert _outcome(full, which, [], tmp_path)[:1] == (0,)
            assert len(raw_records(full.home(which), size)) == 1


def test_a_file_size_limit_fails_the_write_not_the_shim(pair: Pair, tmp_path: Path) -> None:
    import resource

    for which in ("sh", "native"):
        home = pair.home(which)
        size = log_size(home)

        def limit(size: int = size) -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (size + 40, size + 40))

        link = pair.link("true", which)
        done = run([link, "x"], {"PATH": "/usr/bin:/bin"}, preexec_fn=limit)
        refuse = '"refuse"' in (home.loc.shim_dir / "manifest.toml").read_text()
        assert done.returncode == (126 if refuse else 0), done.stderr
        assert done.stderr.count(b"\n") == 1
        assert log_size(home) == size + 40  # a torn record, which the reader skips


# ---- exact pass-through --------------------------------------------------------------


def _direct_and_shimmed(
    pair: Pair, name: str, args: list[str], launcher: list[str], **kw: object
) -> tuple[subprocess.CompletedProcess[bytes], subprocess.CompletedProcess[bytes]]:
    target = shutil.which(name) if name != "sh" else SH()
    assert target
    direct = run([*launcher, target, *args], **kw)  # type: ignore[arg-type]
    shimmed = run([*launcher, pair.link(name, "native"), *args], **kw)  # type: ignore[arg-type]
    return direct, shimmed


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_status_stdio_bytes_pass_through(pair: Pair, launcher: str) -> None:
    payload = bytes(range(256)) * 4096 + b"\0tail\n"
    d, s = _direct_and_shimmed(
        pair, "sh", ["-c", "cat; printf 'err\\0\\377' >&2; exit 7"], _launcher(launcher),
        input=payload, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert (s.returncode, s.stdout, s.stderr) == (d.returncode, d.stdout, d.stderr)
    assert s.returncode == 7 and s.stdout == payload and s.stderr == b"err\0\xff"


def test_signals_pass_through(pair: Pair) -> None:
    d, s = _direct_and_shimmed(pair, "sh", ["-c", "kill -TERM $$"], [], env={"PATH": "/bin"})
    assert d.returncode == s.returncode == -signal.SIGTERM
    home = pair.nat
    proc = subprocess.Popen([pair.link("sleep", "native"), "30"], env={"PATH": "/usr/bin:/bin"})
    for _ in range(500):
        if log_size(home):
            break
        time.sleep(0.01)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == -signal.SIGINT


def _sig_ignored(pair: Pair, which: str, sig: int, ignore: bool) -> bool:
    def setup() -> None:
        signal.signal(sig, signal.SIG_IGN if ignore else signal.SIG_DFL)

    out = run(
        [pair.link("sh", which), "-c", "grep SigIgn /proc/self/status"],
        {"PATH": "/usr/bin:/bin"},
        preexec_fn=setup,
    ).stdout
    mask = int(out.split()[1], 16)
    return bool(mask >> (sig - 1) & 1)


@pytest.mark.parametrize("ignore", [False, True])
def test_signal_dispositions_reach_the_target_as_they_came(pair: Pair, ignore: bool) -> None:
    # SIGXFSZ is ignored while the record is written: the caller's disposition is put back
    for sig in (signal.SIGXFSZ, signal.SIGINT, signal.SIGPIPE):
        assert _sig_ignored(pair, "native", sig, ignore) == ignore


@pytest.mark.parametrize("launcher", ["python", "dash", "bash"])
def test_argv_and_every_environment_entry_pass_through(pair: Pair, launcher: str) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "BASH_FUNC_f%%": "() { echo hi; }",
        "A.B": "1",
        "1X": "digit first",
        "with space": "v",
        "IFS": ":",
        "_": "/caller/underscore",
        "SHLVL": "7",
        "LC_ALL": "C.UTF-8",
        "PWD": "/not/the/cwd",
        "OLDPWD": "/x",
        "BYTES": os.fsdecode(b"\xff\xfe\n"),
        "EMPTY": "",
    }
    if launcher != "python":  # a shell between adds and drops its own: only Python's is exact
        d, s = _direct_and_shimmed(pair, "env", ["-0"], _launcher(launcher), env=env)

        def entries(out: bytes) -> list[bytes]:  # bash sets `_` to the path it ran
            return [e for e in out.split(b"\0") if not e.startswith(b"_=")]

        assert entries(s.stdout) == entries(d.stdout)
        return
    target = shutil.which("cat")
    assert target
    link = pair.link("cat", "native")
    got = run([link, "/proc/self/environ"], env).stdout
    assert got == run([target, "/proc/self/environ"], env).stdout
    assert b"BASH_FUNC_f%%=() { echo hi; }\0" in got and b"A.B=1\0" in got
    # argv[0] as the caller gave it, and the rest
    argv = [b"custom argv0", b"/proc/self/cmdline", b"\xff", b""]
    shimmed = subprocess.run(argv, executable=link, env=env, capture_output=True).stdout
    direct = subprocess.run(argv, executable=target, env=env, capture_output=True).stdout
    assert shimmed == direct == b"\0".join(argv) + b"\0"


def test_nothing_in_the_environment_moves_or_silences_the_record(
    pair: Pair, tmp_path: Path
) -> None:
    cc = need_cc()
    # a preload that would make every write() fail, were any loader to honour it
    src = tmp_path / "nowrite.c"
    src.write_text(
        "#include <unistd.h>\n#include <errno.h>\n"
        "ssize_t write(int fd, const void *b, size_t n) { errno = EIO; return -1; }\n"
    )
    lib = tmp_path / "nowrite.so"
    subprocess.run([*cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    elsewhere = tmp_path / "elsewhere"
    env = {
        "PATH": "/usr/bin:/bin",
        "LD_PRELOAD": str(lib),
        "LD_LIBRARY_PATH": str(tmp_path),
        "HOME": str(elsewhere),
        "XDG_STATE_HOME": str(elsewhere),
        "XDG_DATA_HOME": str(elsewhere),
        "MCPSHIM_LOG_DIR": str(elsewhere),
        "ENV": "/dev/null",
        "BASH_ENV": "/dev/null",
        "IFS": "x",
        "LC_ALL": "xx_XX",
    }
    home = pair.nat
    size = log_size(home)
    done = run([pair.link("true", "native"), "a"], env)
    assert done.returncode == 0 and done.stderr == b""
    assert len(raw_records(home, size)) == 1
    assert not elsewhere.exists()


def test_the_target_is_exec_d_in_place_same_pid(pair: Pair) -> None:
    out = run(
        [pair.link("sh", "native"), "-c", "echo $$; cut -d' ' -f22 /proc/$$/stat"],
        {"PATH": "/usr/bin:/bin"},
    )
    pid, start = out.stdout.decode().split()
    recs = pair.nat.execs()
    assert recs[-1].pid == int(pid) and recs[-1].start == int(start)
