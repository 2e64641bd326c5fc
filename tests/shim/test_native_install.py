"""install --native, list and uninstall of native shims; the pinned values as C literals;
the trigger matcher held against dash's own `case`."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcpshim.log import redact_sh
from mcpshim.shim import install as shim_install
from mcpshim.shim import native
from mcpshim.shim.manifest import load_manifest
from tests.fixtures.home import Home, dash_path
from tests.fixtures.nativekit import need_cc

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def cli(
    home: Home, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPSHIM, *args], env={**home.env, **(env or {})}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def test_install_native_then_list_and_uninstall(home: Home) -> None:
    need_cc()
    out = cli(home, "install", "--native", "git", "true")
    assert out.returncode == 0, out.stderr
    assert "installed git -> " in out.stdout and "(native)" in out.stdout
    shim = home.loc.shim_dir / "git"
    assert shim.read_bytes()[:4] == b"\x7fELF"
    assert (home.loc.shim_dir / ".mcpshim-sh" / "git").read_text().startswith("#!")
    m = load_manifest(home.loc.shim_dir)
    assert m is not None and m.shims["git"].kind == "native"
    listed = cli(home, "list")
    assert listed.returncode == 0
    assert [ln.split()[:3] for ln in listed.stdout.splitlines()[:2]] == [
        ["git", "native", "ok"],
        ["true", "native", "ok"],
    ]
    js = cli(home, "list", "--format", "json").stdout
    assert '"type": "native"' in js
    # a rerun changes nothing (no rebuild)
    again = cli(home, "install", "git")
    assert "unchanged git" in again.stdout and shim.stat().st_mtime_ns == shim.stat().st_mtime_ns
    out = cli(home, "uninstall", "git")
    assert out.returncode == 0 and "removed git" in out.stdout
    assert not shim.exists() and not (home.loc.shim_dir / ".mcpshim-sh" / "git").exists()
    cli(home, "uninstall", "--all")
    assert not (home.loc.shim_dir / ".mcpshim-sh").exists()


def test_list_verifies_the_binary_and_its_sh_fallback(home: Home) -> None:
    need_cc()
    assert cli(home, "install", "--native", "true").returncode == 0
    shim = home.loc.shim_dir / "true"
    fb = home.loc.shim_dir / ".mcpshim-sh" / "true"
    data = shim.read_bytes()
    shim.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    out = cli(home, "list")
    assert out.returncode == 1 and "shim-edited" in out.stdout
    shim.write_bytes(data)
    assert cli(home, "list").returncode == 0
    fb.write_text(fb.read_text() + "#\n")
    assert "shim-edited" in cli(home, "list").stdout
    fb.unlink()
    assert "shim-missing" in cli(home, "list").stdout
    # install puts both back
    assert cli(home, "install", "true").returncode == 0
    assert cli(home, "list").returncode == 0


def test_without_a_compiler_one_warning_and_the_sh_shim(home: Home) -> None:
    out = cli(home, "install", "--native", "true", env={"CC": "/nonexistent/cc"})
    assert out.returncode == 0
    assert out.stderr.count("\n") == 1 and "no C compiler" in out.stderr
    assert "warning" in out.stderr
    assert (home.loc.shim_dir / "true").read_bytes().startswith(b"#!")
    req = cli(home, "install", "--native=require", "git", env={"CC": "/nonexistent/cc"})
    assert req.returncode == 2 and "no C compiler" in req.stderr
    assert not (home.loc.shim_dir / "git").exists()


def test_a_compiler_that_fails_is_said_in_one_line(home: Home, tmp_path: Path) -> None:
    bad = tmp_path / "badcc"
    bad.write_text("#!/bin/sh\necho 'cc: no such thing' >&2\nexit 1\n")
    bad.chmod(0o755)
    out = cli(home, "install", "--native", "true", env={"CC": str(bad)})
    assert out.returncode == 0 and out.stderr.count("\n") == 1 and "failed" in out.stderr
    req = cli(home, "install", "--native=require", "true", env={"CC": str(bad)})
    assert req.returncode == 2


def test_other_systems_fall_back_to_sh_and_say_so(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("platform.machine", lambda: "riscv64")
    res = shim_install.install(home.loc, ["true"], {}, native_mode="auto")
    assert [e.kind for e in res.installed] == ["sh"]
    assert len(res.notes) == 1 and "riscv64" in res.notes[0]
    monkeypatch.setattr("platform.system", lambda: "Darwin")
    with pytest.raises(Exception, match="Darwin"):
        shim_install.install(home.loc, ["git"], {}, native_mode="require")


def test_back_to_sh_with_native_off(home: Home) -> None:
    need_cc()
    assert cli(home, "install", "--native", "true").returncode == 0
    out = cli(home, "install", "--native=off", "true")
    assert out.returncode == 0 and "installed true" in out.stdout
    assert (home.loc.shim_dir / "true").read_bytes().startswith(b"#!")
    assert not (home.loc.shim_dir / ".mcpshim-sh" / "true").exists()
    assert cli(home, "list").returncode == 0


def test_a_foreign_binary_is_left_alone(home: Home) -> None:
    need_cc()
    home.loc.shim_dir.mkdir(parents=True)
    foreign = home.loc.shim_dir / "true"
    shutil.copy("/bin/true", foreign)
    out = cli(home, "install", "--native", "true")
    assert out.returncode == 2 and "not written by mcpshim" in out.stderr
    assert foreign.read_bytes() == Path("/bin/true").read_bytes()


def test_c_literals_keep_every_byte(tmp_path: Path) -> None:
    """Each byte value, and the sequences C could misread (a comment end, trigraphs, a hex
    escape followed by a hex digit, quotes, backslashes), through a real compiler."""
    cc = need_cc()
    values = [
        bytes(range(1, 256)),
        b'*/ /* ??= ??/ ??\' "q" \\ \\x41B \\101 \n\r\t',
        b"\xff\xfe\x80 not utf-8",
        "é 漢字".encode(),
    ]
    src = tmp_path / "lit.c"
    body = "\n".join(
        f"fwrite({native.c_string(v)}, 1, sizeof({native.c_string(v)}) - 1, stdout);"
        for v in values
    )
    src.write_text(f"#include <stdio.h>\nint main(void) {{\n{body}\nreturn 0;\n}}\n")
    exe = tmp_path / "lit"
    subprocess.run([*cc, "-std=gnu11", "-o", str(exe), str(src)], check=True)
    assert subprocess.run([str(exe)], capture_output=True, check=True).stdout == b"".join(values)


def test_paths_with_quotes_backslashes_and_other_bytes_stay_what_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_cc()
    # (bytes that are not UTF-8 the manifest cannot hold: install refuses them for sh shims
    # too; c_string keeps them, test_c_literals_keep_every_byte)
    odd = "o'd\"d \\x41 \\101 $(x) `y` * */ ??= é"
    root = tmp_path / odd
    (root / "bin").mkdir(parents=True)
    target = root / "bin" / ("t" + odd.replace("/", "|"))
    shutil.copy("/bin/true", target)
    env = {"HOME": str(root), "XDG_STATE_HOME": str(root / "state")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    from mcpshim.paths import Locations

    loc = Locations(root / "shims", root / f"log{odd}")
    res = shim_install.install(
        loc, ["t"], {"t": str(target)}, allow_unsafe=True, native_mode="require"
    )
    assert [e.kind for e in res.installed] == ["native"]
    done = subprocess.run([str(loc.shim_dir / "t"), "a"], env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0
    raw = loc.log_file.read_bytes()
    assert b"\0=" + os.fsencode(target) + b"\0=" in raw
    assert raw.count(b"\0R") == 1 and raw.endswith(b"\0=1\0=a\0\n")


@pytest.mark.parametrize("name", ["curl", "mysql", "git", "ssh"])
def test_the_trigger_matcher_is_dash_s_case(tmp_path: Path, name: str) -> None:
    """The C matcher (a test build of native.c) and dash's `case` over the same strings:
    fragments of every pattern, mixed at random, with the blanks of " $* "."""
    cc = need_cc()
    triggers = redact_sh.sh_triggers(name, name)
    cfg = native.NativeConfig(name, "/bin/true", "/nonexistent", "run", "/bin/sh", False, (), "/x")
    exe = tmp_path / "match"
    exe.write_bytes(native.build(native.render_config(cfg), cc, ("-DMCPSHIM_MATCH_TEST",)))
    exe.chmod(0o755)
    rng = random.Random(name)
    bits = ["key", "KeY", "token", "PASS", "auth", "Auth=", "pat ", "ghp_", "github_pat_",
            "sk-", "xoxb-", "AKIA", "glpat-", "npm_", "AIza", "eyJ", "mysql", "curl", "@", "://",
            " -u", "u ", " -p", "p ", "--user", "x" * 40, "y" * 39, "\t", "\n", "\udcff", " ",
            "a", "-"]  # fmt: skip
    strings = []
    for _ in range(400):
        s = "".join(rng.choice(bits) for _ in range(rng.randrange(0, 6)))
        strings.append(" " + s + " ")
    strings += [" " + "z" * 40 + " ", " z" + "z" * 40 + " ", "  ", " @x:// "]
    args = [os.fsencode(s) for s in strings]
    got = subprocess.run([str(exe), *args], capture_output=True, check=True).stdout.split()
    script = f"""for s; do case $s in {triggers}) echo 1 ;;
        *@*) case $s in *://*) echo 1 ;; *) echo 0 ;; esac ;; *) echo 0 ;; esac; done"""
    want = subprocess.run(
        [dash_path(), "-c", script, "sh", *args],
        capture_output=True,
        check=True,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
    ).stdout.split()
    assert len(got) == len(want) == len(strings)
    wrong = [strings[i] for i in range(len(strings)) if got[i] != want[i]]
    assert wrong == []
    assert b"1" in want and b"0" in want


def test_trigger_patterns_the_translation_cannot_read_are_refused() -> None:
    for bad in ("*[[:alpha:]]*", "*$(x)*", "*[^a]*"):
        with pytest.raises(ValueError):
            native.compile_patterns(bad)
    prog, sets = native.compile_patterns("*'a b'* | x?[!y]*")
    assert prog.count(0xFE) == 2 and len(sets) % 32 == 0
