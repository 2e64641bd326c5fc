"""The target's environment is the caller's: /proc/self/environ of the pinned target, run
through a shim, against the same target run directly, started from Python and from real
`dash -c` and `bash -c`.

What the shells allow is exact: a bash shim gives its target every entry the caller had and
no other (bash's own changes undone from /proc/self/environ). What they do not allow is
documented in docs/threat-model.md and held here entry by entry: dash drops every entry
whose name is not a shell name and sets its own IFS, PWD, OPTIND and PPID; bash keeps PPID,
SHELLOPTS and BASHOPTS readonly; neither keeps the order of the entries.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mcpshim.shim.manifest import load_manifest
from tests.fixtures.home import Home, install

#: entries a shell would take or change, and names that are no shell names
HOSTILE = {
    "BASH_FUNC_f%%": "() { echo hi; }",
    "A.B": "1",
    "1A": "2",
    "IFS": ":",
    "OLDPWD": "/nonexistent",
    "PS1": "x$ ",
    "PS2": "> more",
    "PS4": "+> ",
    "OPTIND": "3",
    "RANDOM": "4",
    "LINENO": "9",
    "BASH": "/not/bash",
    "BASH_VERSION": "0.1",
    "POSIXLY_CORRECT": "1",
    "HISTCMD": "7",
    "EPOCHSECONDS": "1",
}
CASES = {
    "no-pwd-no-shlvl": {},  # what the official SDKs pass a server: neither
    "stale-pwd-shlvl": {"PWD": "/nonexistent", "SHLVL": "5", "_": "/somewhere/else"},
    "shlvl-0": {"SHLVL": "0", "PWD": "{cwd}"},
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CLOCK = re.compile(rb"\AEPOCHSECONDS=[0-9]+\Z")


def _environ(argv: list[str], env: dict[str, str], cwd: Path) -> list[bytes]:
    """The target's /proc/self/environ, entry by entry (cat prints its own). Started by a
    shell, `_` is the path that shell executed (the shim's, or the target's): the caller's
    own entry, passed on as it is, but no part of the comparison."""
    out = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=True, timeout=60)
    assert out.stdout.endswith(b"\0")
    got = out.stdout[:-1].split(b"\0")
    if argv[1:2] != ["-c"]:
        return got
    # a caller's bash exports EPOCHSECONDS as its own clock, read when it starts the child:
    # the name is the caller's entry, its value a second that two runs need not share
    return [_CLOCK.sub(b"EPOCHSECONDS=<clock>", e) for e in got if not e.startswith(b"_=")]


def _start(how: str, target: str) -> list[str]:
    """`target /proc/self/environ` started by Python itself or by a real shell."""
    if how == "python":
        return [target, "/proc/self/environ"]
    shell = shutil.which(how)
    if shell is None:
        pytest.skip(f"{how} not installed")
    return [shell, "-c", '"$0" /proc/self/environ; exit $?', target]


def _as_dash_passes_it(entries: list[bytes], cwd: Path) -> list[bytes]:
    """What a dash shim gives its target for the entries a direct run gets (the limits
    docs/threat-model.md states): no entry whose name is no shell name; its own IFS, PWD,
    OPTIND (PPID: left out of the comparison)."""
    out: dict[bytes, bytes] = {}
    for e in entries:
        name, _, value = e.partition(b"=")
        if _NAME.match(name.decode()) and name != b"PPID":
            out[name] = value
    if b"IFS" in out:
        out[b"IFS"] = b" \t\n"
    if b"OPTIND" in out:
        out[b"OPTIND"] = b"1"
    pwd = out.get(b"PWD")
    if pwd is None or not os.path.isdir(pwd) or not os.path.samefile(pwd, cwd):
        out[b"PWD"] = os.fsencode(os.path.realpath(cwd))
    return sorted(k + b"=" + v for k, v in out.items())


@pytest.mark.parametrize("how", ["python", "dash", "bash"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_targets_environ_is_the_callers(
    home: Home, interpreter: str, tmp_path: Path, how: str, case: str
) -> None:
    install(home, ["cat"], interpreter)
    m = load_manifest(home.loc.shim_dir)
    assert m is not None
    extra = {k: v.format(cwd=tmp_path) for k, v in CASES[case].items()}
    env = {"HOME": home.env["HOME"], "PATH": "/usr/bin:/bin", **HOSTILE, **extra}
    direct = _environ(_start(how, m.shims["cat"].target), env, tmp_path)
    shimmed = _environ(_start(how, str(home.loc.shim_dir / "cat")), env, tmp_path)
    if "bash" in interpreter:
        assert sorted(shimmed) == sorted(direct)  # every entry, byte for byte
    else:
        assert sorted(e for e in shimmed if not e.startswith(b"PPID=")) == _as_dash_passes_it(
            direct, tmp_path
        )


def test_what_bash_keeps_readonly_is_its_own(home: Home, bash_as_sh: str, tmp_path: Path) -> None:
    """The documented limit of a bash shim: PPID, SHELLOPTS and BASHOPTS are bash's."""
    install(home, ["cat"], bash_as_sh)
    env = {"PATH": "/usr/bin:/bin", "PPID": "7", "SHELLOPTS": "xtrace", "BASHOPTS": "extglob"}
    got = _environ([str(home.loc.shim_dir / "cat"), "/proc/self/environ"], env, tmp_path)
    names = {e.partition(b"=")[0]: e.partition(b"=")[2] for e in got}
    assert b"PPID" not in names  # bash exports no PPID of its own, and keeps the caller's out
    assert names[b"SHELLOPTS"] != b"xtrace" and names[b"BASHOPTS"] != b"extglob"
    assert b"SHLVL" not in names and b"PWD" not in names and names[b"PATH"] == b"/usr/bin:/bin"
