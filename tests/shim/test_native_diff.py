"""The native shim writes the sh shim's record, byte for byte, for the same exec.

Both shims run over the whole argument corpus (newlines, invalid UTF-8, the largest single
argument with a 1 MiB argv, 10k arguments, record lookalikes, every credential shape of the
redaction corpus) from Python, `dash -c` and `bash -c`, under either interpreter; every
field but the ones that differ between two runs (uptime, pid, ppid, start) is compared as
bytes, and so is the framing (inline, or a spill file with its pointer).
"""

from __future__ import annotations

import io
import os
import random
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mcpshim.log import execlog
from tests.fixtures.home import dash_path
from tests.fixtures.nativekit import (
    Pair,
    log_size,
    make_pair,
    masked,
    need_cc,
    raw_records,
    run,
    shell,
)
from tests.fixtures.redact_corpus import CORPUS as SHAPES
from tests.shim.test_record import CORPUS as ARGS
from tests.shim.test_record import MAX_ARG

TRUE = "/usr/bin/true" if os.path.exists("/usr/bin/true") else "/bin/true"
COMMANDS = sorted({s.command for s in SHAPES} | {"true", "t"})
BASE_ENV = {"PATH": "/usr/bin:/bin", "MCPSHIM_SESSION": "diff-1", "LC_ALL": "C.UTF-8"}


@dataclass(frozen=True)
class Case:
    id: str
    cmd: str
    args: Sequence[bytes]
    env: dict[str, str] = field(default_factory=dict)
    drop: tuple[str, ...] = ()  # names taken out of the environment
    link_name: str | None = None


def _cases() -> Iterator[Case]:
    yield Case("no-args", "true", [])
    yield Case("corpus", "true", ARGS)
    for i, a in enumerate(ARGS):
        yield Case(f"corpus-{i}", "true", [a])
    yield Case("forged", "true", [b"R", b"=1", b"=exec", b"\nR=1=exec=0=0=b=1=1=1==/=t", b"\n\n"])
    yield Case("ten-thousand", "true", [f"a{i}\n{i % 7}".encode() for i in range(10_000)])
    big = b"exit 0\n#" + b"x" * (MAX_ARG - 9) + b"\n"
    yield Case("one-mib", "sh", [b"-c", big, *[bytes([65 + i]) * (MAX_ARG - 1) for i in range(8)]])
    for s in SHAPES:
        yield Case(f"shape-{s.name}", s.command, [a.encode() for a in s.args])
    # the sh shim's size estimate, either side of 4000 (one argument's length moves it)
    for n in range(3560, 3620, 7):
        yield Case(f"size-{n}", "true", [b"y" * n])
    yield Case("many-small", "true", [b"ab"] * 400)
    yield Case("session-newline", "true", [b"x"], {"MCPSHIM_SESSION": "a\nb"})
    yield Case("session-bytes", "true", [b"x"], {"MCPSHIM_SESSION": os.fsdecode(b"s\xff\xfe")})
    yield Case("no-session", "true", [b"x"], drop=("MCPSHIM_SESSION",))
    yield Case("no-path", "true", [b"x"], drop=("PATH",))
    yield Case("odd-path", "true", [b"x"], {"PATH": os.fsdecode(b"/usr/bin:\xff:rel dir::/bin")})
    yield Case("long-path", "true", [b"x"], {"PATH": "/usr/bin:" + "/p" * 2000})
    for name in ("x) S 1 1 1 0 -", "a b", "x)y", "a) b\nc", "sp ace", "t\tab"):
        yield Case(f"comm-{name!r}", "t", [b"q"], link_name=name)


CASES = list(_cases())


def _env(case: Case) -> dict[str, str]:
    env = {**BASE_ENV, **case.env}
    for k in case.drop:
        env.pop(k, None)
    return env


@pytest.fixture(scope="module", params=["dash", "bash"])
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Pair:
    need_cc()
    root = tmp_path_factory.mktemp(f"native-{request.param}")
    interp = dash_path()
    if request.param == "bash":
        d = root / "bash-as-sh"
        d.mkdir()
        (d / "sh").symlink_to(shell("bash"))
        interp = str(d / "sh")
    targets = {c: TRUE for c in COMMANDS}
    return make_pair(root, targets, interp)


def _run_both(
    pair: Pair, case: Case, launcher: Sequence[str], cwd: Path | None = None
) -> dict[str, tuple[list[tuple[str, bytes]], int, bytes, bytes]]:
    out = {}
    for which in ("sh", "native"):
        link = pair.link(case.cmd, which, case.link_name)
        home = pair.home(which)
        size = log_size(home)
        done = run([*launcher, link, *case.args], _env(case), cwd=cwd)
        out[which] = (raw_records(home, size), done.returncode, done.stdout, done.stderr)
    return out


def _same(
    got: dict[str, tuple[list[tuple[str, bytes]], int, bytes, bytes]], start_too: bool = False
) -> None:
    sh_recs, *sh_rest = got["sh"]
    nat_recs, *nat_rest = got["native"]
    assert nat_rest == sh_rest
    assert len(nat_recs) == len(sh_recs) >= 1
    for (sf, sr), (nf, nr) in zip(sh_recs, nat_recs, strict=True):
        assert nf == sf  # inline or spilled alike
        want, have = masked(sr), masked(nr)
        # the uptime as /proc/uptime prints it, whichever read it
        for rec in (sr, nr):
            assert re.fullmatch(rb"[0-9]+\.[0-9]{2}", rec.split(b"\0=")[4])
        if start_too:
            want[8] = have[8] = b""
        assert have == want


def _bash(pair: Pair) -> bool:
    return "bash" in str(pair.nat.loc.shim_dir.parents[3])


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_same_record_from_python(pair: Pair, case: Case) -> None:
    # Known difference: a comm crafted to fake stat fields, on a path the native shim hands
    # to the sh shim (under bash a newline in $0 is one), is read with the interpreter's
    # comm then: the record keeps the true start where the sh shim alone keeps none.
    crafted = case.link_name is not None and "\n" in case.link_name and _bash(pair)
    _same(_run_both(pair, case, []), start_too=crafted)


# (run through the shell as its first child: the sh shim keeps the parent's line, the native
# one hands that to it; then a second child, which the native shim records itself)
SHELL_CASES = [c for c in CASES if c.id in ("corpus", "forged", "ten-thousand", "size-3567")]
SHELL_CASES += [c for c in CASES if c.id.startswith("shape-")][:12]


@pytest.mark.parametrize("sh", ["dash", "bash"])
@pytest.mark.parametrize("case", SHELL_CASES, ids=[c.id for c in SHELL_CASES])
def test_the_same_records_from_a_shell(pair: Pair, case: Case, sh: str) -> None:
    got = _run_both(pair, case, [shell(sh), "-c", '"$@"; "$@"', "sh"])
    _same(got)
    assert len(got["native"][0]) == 2


def test_the_same_record_in_odd_working_directories(pair: Pair, tmp_path: Path) -> None:
    for name in (b"with space", b"new\nline", b"bytes\xff\xfe", b"quote'\"\\", b"x" * 200):
        d = tmp_path / os.fsdecode(name)
        d.mkdir()
        _same(_run_both(pair, Case("cwd", "true", [b"x"]), [], cwd=d))
    deep = tmp_path
    for _ in range(20):  # a cwd longer than one write holds: the sh shim spills it
        deep = deep / ("d" * 200)
        deep.mkdir()
    _same(_run_both(pair, Case("cwd", "true", [b"x"]), [], cwd=deep))


def test_the_same_record_for_random_arguments(pair: Pair) -> None:
    """A quick fuzz of the formatting and the size bound: random bytes, counts and lengths,
    with fragments of the trigger patterns mixed in; each record decodes to the arguments
    it was given (or their redaction, the sh shim's alike)."""
    rng = random.Random(32)
    bits = [b"key", b"KEY", b"@", b"://", b" -u", b"u ", b"ghp_", b"x" * 40, b"\n", b"\xff", b"="]
    for _ in range(60):
        args = []
        for _ in range(rng.choice([0, 1, 2, 5, 40, 300])):
            a = bytes(rng.randrange(1, 256) for _ in range(rng.choice([0, 1, 8, 30, 200])))
            if rng.random() < 0.1:
                a += rng.choice(bits)
            args.append(a)
        got = _run_both(pair, Case("fuzz", "true", args), [])
        _same(got)
        [(_, rec)] = got["native"][0]
        problems: list[execlog.LogProblem] = []
        [decoded] = execlog.read_stream(io.BytesIO(rec), "fuzz", None, problems)
        assert problems == [] and isinstance(decoded, execlog.ExecRecord)
        if not decoded.redactions:
            assert decoded.args == tuple(args)


def test_the_native_shim_records_the_common_path_itself(pair: Pair) -> None:
    """No hidden fallback: with the interpreter gone, a plain exec is still recorded (the
    native shim never ran the sh one), and an exec that needs the sh shim is not."""
    case = Case("plain", "true", [b"plain"])
    home = pair.nat
    link = pair.link("true", "native")
    fb = home.loc.shim_dir / ".mcpshim-sh" / "true"
    saved = fb.read_bytes()
    fb.unlink()
    try:
        size = log_size(home)
        done = run([link, *case.args], _env(case))
        assert done.returncode == 0 and done.stderr == b""
        assert len(raw_records(home, size)) == 1
        size = log_size(home)
        done = run([link, "--password=x"], _env(case))
        assert done.returncode == 0
        assert b"sh shim" in done.stderr and done.stderr.count(b"\n") == 1
        assert raw_records(home, size) == []
    finally:
        fb.write_bytes(saved)
    assert shutil.which("true")
