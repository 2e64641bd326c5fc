"""What `mcpshim run` does before its server starts is done on a few of the standard
library's modules (issue 42: the first byte), and the lean pieces that make it so answer
exactly as the libraries they stand in for: the directories as paths.Locations and the
manifest give them, `which` as shutil's, the ZDOTDIR files' quoting as shlex's, the first
record's JSON as json's."""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpshim.base.pathsearch import which
from mcpshim.log import eventlog
from mcpshim.shim.manifest import Manifest, locations_for, write_manifest
from mcpshim.shim.rundirs import run_dirs
from mcpshim.shim.zdotdir import quote
from tests.fixtures.home import Home, install

#: what the start must not wait for: each takes milliseconds to load, most bring re
HEAVY = ("re", "typing", "pathlib", "json", "dataclasses", "inspect", "shutil", "ctypes",
         "tomllib", "platformdirs", "subprocess", "tempfile", "click", "psutil")  # fmt: skip

SPAWN_PROBE = """
import sys
def hook(event, args):
    if event == "os.posix_spawn" and list(args[1])[-1:] == ["mcpshim-marker"]:
        with open(OUT, "w") as fh:  # (run ends with os._exit: said now)
            fh.write(" ".join(sorted(sys.modules)))
sys.addaudithook(hook)
sys.argv = ["mcpshim", "run", *sys.argv[1:], "--", "/bin/echo", "mcpshim-marker"]
from mcpshim.__main__ import main
main()
"""


def _plain_env(home: Home) -> dict[str, str]:
    """The home's environment without coverage's (`make cov` loads it into every Python)."""
    return {k: v for k, v in home.env.items() if not k.startswith("COV")}


def _modules_at_spawn(home: Home, tmp_path: Path, *options: str) -> list[str]:
    out = tmp_path / "modules.txt"
    code = f"OUT = {str(out)!r}\n" + SPAWN_PROBE
    done = subprocess.run([sys.executable, "-c", code, "--dir", str(home.loc.shim_dir), *options],
                          env=_plain_env(home), stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert out.exists(), "the server was not spawned by posix_spawn: " + done.stderr.decode()
    return out.read_text().split()


def test_run_starts_its_server_on_few_modules(home: Home, tmp_path: Path) -> None:
    """Loaded when the server is spawned, traced (strace probed and its FIFO set up) or
    not: none of the heavy modules (platformdirs, pathlib, dataclasses, re, tempfile and
    the like: 40 ms between `run` and the interpreter's own start). Python's own start
    loads none of them either."""
    install(home, ["sh"])
    bare = subprocess.run([sys.executable, "-c", "import sys; print(' '.join(sys.modules))"],
                          env=_plain_env(home), capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert not set(HEAVY) & set(bare.stdout.split())
    traced = [["--mcp"], ["--mcp", "--trace"], []] if shutil.which("strace") else []
    for options in (["--no-trace"], ["--mcp", "--no-trace"], ["--mcp", "--no-trace", "--name=x"],
                    *traced):  # fmt: skip
        loaded = _modules_at_spawn(home, tmp_path, *options)
        assert "mcpshim.supervise.launch" in loaded  # the prelaunch started it
        assert [m for m in HEAVY if m in loaded] == [], options


# ---- the lean pieces answer as the libraries do ---------------------------------------------


def _manifest(log_dir: str) -> Manifest:
    return Manifest(log_dir, "run", sys.executable, {})


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"XDG_DATA_HOME": "/x/data", "XDG_STATE_HOME": "/x/state"},
        {"XDG_DATA_HOME": "", "XDG_STATE_HOME": " "},
        {"XDG_DATA_HOME": "rel/data"},
        {"XDG_DATA_HOME": "/x//data/", "XDG_STATE_HOME": "/x/./state"},
        {"HOME": "/"},
        {"HOME": "relative"},
        {"HOME": "/h/trailing/"},
        {"XDG_DATA_HOME": "/"},
    ],
)
def test_the_directories_are_those_locations_gives(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_dirs, with and without --dir and --log-dir, over the environments platformdirs
    and pathlib read differently, and manifests of every shape: the same directories as
    locations_for (what every other command uses)."""
    monkeypatch.chdir(tmp_path)  # (the relative --dir's)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("XDG_DATA_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    from mcpshim.paths import default_shim_dir

    shim_dirs = [None, str(tmp_path / "s"), str(tmp_path / "s") + "/", "rel//s", "./s"]
    logs = ["/l", str(tmp_path / "l o g"), '/l/with"quote', "/l\\back", "/l/ü", "/l//x", "rel"]
    for given in shim_dirs:
        shim = Path(given) if given is not None else default_shim_dir()
        # manifests only where the test may write: a default outside tmp_path is only read
        mine = Path(os.path.abspath(shim)).is_relative_to(tmp_path)
        for log in [None, *logs]:
            for manifest in [None, *logs, "/l\tab"] if mine else [None]:
                if manifest is not None:
                    shim.mkdir(parents=True, exist_ok=True)
                    write_manifest(shim, _manifest(manifest))
                elif mine:
                    (shim / "manifest.toml").unlink(missing_ok=True)
                want = locations_for(shim, Path(log) if log is not None else None)
                got = run_dirs(given, log).locations()
                assert got == want, (given, log, manifest)
                assert run_dirs(given, log).shim_dir == str(want.shim_dir)


def test_a_manifest_not_written_plainly_is_read_by_the_manifest_s_reader(tmp_path: Path) -> None:
    """A log_dir line the fast read does not take (an escape, another key's multi-line
    string, the key twice, a comment after it) is left to tomllib: same answer, or its
    error."""
    shim = tmp_path / "s"
    shim.mkdir()
    texts = [
        'log_dir = "/a\\u0062c"\n',
        'x = """\nlog_dir = "/fake"\n"""\nlog_dir = "/real"\n',
        "log_dir = '/literal'\n",
        'log_dir = "/a" # note\n',
        '"log_dir" = "/quoted-key"\n',
        '\ufefflog_dir = "/bom"\n',
    ]
    for text in texts:
        (shim / "manifest.toml").write_text(
            text + 'on_log_failure = "run"\ninterpreter = "/bin/sh"\n', encoding="utf-8"
        )
        assert run_dirs(str(shim), None).locations() == locations_for(shim), text
    (shim / "manifest.toml").write_text('log_dir = "/a"\nlog_dir = "/b"\n')
    with pytest.raises(Exception, match="not a valid manifest"):
        run_dirs(str(shim), None)


def test_the_temporary_directory_is_tempfile_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """shim.targets.gettempdir (strace's place is checked before the server starts) gives
    tempfile.gettempdir()'s answer, whichever variables name a directory, usable or not."""
    import tempfile

    from mcpshim.shim.targets import gettempdir

    usable = tmp_path / "usable"
    usable.mkdir()
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    monkeypatch.chdir(tmp_path)
    for tmpdir in (None, str(usable), str(tmp_path / "missing"), str(a_file), "usable", ""):
        for temp in (None, str(usable) + "/", str(tmp_path / "missing")):
            for var, value in (("TMPDIR", tmpdir), ("TEMP", temp), ("TMP", None)):
                if value is None:
                    monkeypatch.delenv(var, raising=False)
                else:
                    monkeypatch.setenv(var, value)
            monkeypatch.setattr(tempfile, "tempdir", None)  # (it keeps its first answer)
            assert gettempdir() == tempfile.gettempdir(), (tmpdir, temp)


def test_which_answers_as_shutil_which(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(7)
    names = ["a", "b", "c"]
    dirs = []
    for i in range(6):
        d = tmp_path / f"d{i}"
        d.mkdir()
        dirs.append(str(d))
        for n in names:
            kind = rnd.choice(["exec", "plain", "dir", "none"])
            if kind == "dir":
                (d / n).mkdir()
            elif kind != "none":
                (d / n).write_text("#!/bin/sh\n")
                (d / n).chmod(0o755 if kind == "exec" else 0o644)
    monkeypatch.chdir(dirs[0])  # ("" in PATH: the working directory)
    for _ in range(300):
        path = ":".join(rnd.choice([*dirs, "", "/nonexistent"]) for _ in range(rnd.randint(0, 5)))
        for n in names:
            assert which(n, path) == shutil.which(n, path=path), (n, path)


def test_the_zdotdir_quoting_is_shlex_s() -> None:
    rnd = random.Random(3)
    alphabet = "aZ09_@%+=:,./- '\"$`\\\n\tüé*?~!#&;|<>()[]{}"
    samples = ["", "'", "/home/a b/.zsh", "/plain/path"]
    samples += [
        "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 12))) for _ in range(3000)
    ]
    for s in samples:
        assert quote(s) == shlex.quote(s), s


def test_the_first_record_s_json_is_json_s() -> None:
    rnd = random.Random(5)
    alphabet = 'az"\\/\n\r\t\b\f\x00\x01\x1f\x7f\u2028ü😀 {}:,'

    def text() -> str:
        return "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 10)))

    for _ in range(2000):
        payload = {text(): text() for _ in range(rnd.randint(0, 5))}
        want = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        assert eventlog._strings_json(payload) == want, payload
    others: list[dict[Any, Any]] = [{"n": 1}, {"a": None}, {"a": ["x"]}, {"a": True}, {1: "x"}]
    for other in others:
        assert eventlog._strings_json(other) is None  # json's own way


def test_the_subreaper_is_set_through_the_c_module() -> None:
    code = """
import ctypes
from mcpshim.supervise.spawn import set_child_subreaper
got = ctypes.c_int(-1)
libc = ctypes.CDLL(None)
libc.prctl(37, ctypes.byref(got), 0, 0, 0)
before = got.value
ok = set_child_subreaper()
libc.prctl(37, ctypes.byref(got), 0, 0, 0)
print(before, ok, got.value)
"""
    if not sys.platform.startswith("linux"):
        pytest.skip("Linux-only: PR_SET_CHILD_SUBREAPER")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", "True", "1"]
