"""A shim run by bash is as immune to the caller's environment as one run by dash.

bash takes more from the environment than dash: exported functions (BASH_FUNC_name%%, which
override builtins such as unset, printf and exec outside POSIX mode), BASH_ENV (a script run
before the shim's first line), SHELLOPTS and BASHOPTS (xtrace with a PS4 holding `$(...)`,
errexit, noexec...), FUNCNEST (aborts the script). Install renders bash shims with `-p`; the
shim puts back what it must touch. Each hostile variable below is tried alone against dash,
bash started as sh (POSIX mode, /bin/sh on Fedora or macOS) and bash as bash: the record is
the one true record, the pinned target runs and prints what it should, nothing else runs.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mcpshim.shim.manifest import load_manifest
from tests.fixtures.home import Home, dash_path, install

#: every builtin and special builtin the shim and its library call, and the ones an attacker
#: would pick first
BUILTINS = [
    "unset",
    "printf",
    "exec",
    "read",
    "cd",
    "command",
    "test",
    "[",
    ".",
    "set",
    "shift",
    "trap",
    "umask",
    "return",
    "export",
    "exit",
    "break",
    "continue",
    "eval",
    ":",
    "true",
    "false",
    "echo",
    "type",
    "builtin",
    "source",
    "local",
    "declare",
    "enable",
]


def _interp(kind: str, tmp_path: Path) -> str:
    if kind == "dash":
        return dash_path()
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash not installed")
    if kind == "bash":
        return bash
    d = tmp_path / "bash-as-sh"
    d.mkdir(exist_ok=True)
    (d / "sh").symlink_to(bash)
    return str(d / "sh")


def _hostile(evil: Path, flag: Path) -> dict[str, dict[str, str]]:
    """name -> the environment entries of one attack."""
    run_evil = f"{evil} >/dev/null 2>&1"
    funcs = {f"BASH_FUNC_{b}%%": f"() {{ {run_evil}; }}" for b in BUILTINS}
    attacks: dict[str, dict[str, str]] = {
        "functions": funcs,
        "BASH_ENV": {"BASH_ENV": str(evil)},
        "ENV": {"ENV": str(evil)},
        "xtrace-ps4": {"SHELLOPTS": "xtrace", "PS4": f"$({run_evil})"},
        "SHELLOPTS": {"SHELLOPTS": "errexit:nounset:noglob:noexec:allexport:verbose:xtrace"},
        "BASHOPTS": {
            "BASHOPTS": "extglob:nocasematch:failglob:nullglob:execfail:xpg_echo:extdebug"
        },
        "FUNCNEST": {"FUNCNEST": "1"},
        "POSIXLY_CORRECT": {"POSIXLY_CORRECT": "1"},
        "GLOBIGNORE": {"GLOBIGNORE": "*"},
        "CDPATH": {"CDPATH": str(flag.parent)},
        "TMOUT": {"TMOUT": "1"},
        "EXECIGNORE": {"EXECIGNORE": "*"},
        "BASH_ARGV0": {"BASH_ARGV0": "forged"},
        "PROMPT_COMMAND": {"PROMPT_COMMAND": run_evil},
        "BASH_XTRACEFD": {"BASH_XTRACEFD": "1"},
        "IFS": {"IFS": "/ e"},
        # (not OPTIND=x: dash itself refuses to start with it, before any script)
        "LINENO-SECONDS": {"LINENO": "x", "OPTERR": "x", "SECONDS": "x", "RANDOM": "x"},
        # a dash shim that believed these would take bash's paths (its arrays: exit 2)
        "BASH_VERSION": {"BASH_VERSION": "5.2.15(1)-release", "BASH": "/bin/bash"},
    }
    for level in ("31", "32", "40", "41", "42", "43", "44", "50", "51"):
        attacks[f"BASH_COMPAT={level}"] = {"BASH_COMPAT": level}
    return attacks


ATTACKS = sorted(_hostile(Path("/e"), Path("/f/f")))


#: the common path, the library's scrubbing path and its spill path (functions nest deeper)
ARGS = {"plain": "hello", "secret": "--password=hunter2", "big": "x" * 6000}


@pytest.mark.parametrize("kind", ["dash", "bash-as-sh", "bash"])
@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("arg", sorted(ARGS))
def test_the_environment_cannot_forge_suppress_or_redirect(
    home: Home, tmp_path: Path, kind: str, attack: str, arg: str
) -> None:
    install(home, ["echo"], _interp(kind, tmp_path))
    flag = tmp_path / "evil-ran"
    evil = tmp_path / "evil.sh"
    evil.write_text(
        f"#!/bin/sh\ntouch {flag}\n"
        f"printf() {{ touch {flag}; }}\nunset() {{ touch {flag}; }}\nexec() {{ touch {flag}; }}\n"
    )
    evil.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home.root), **_hostile(evil, flag)[attack]}
    value = ARGS[arg]
    out = subprocess.run(
        [str(home.loc.shim_dir / "echo"), value], env=env, capture_output=True, timeout=30
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, value.encode() + b"\n", b"")
    assert not flag.exists()
    [rec] = home.execs()
    m = load_manifest(home.loc.shim_dir)
    assert m is not None
    assert (rec.target, rec.shim, len(rec.args)) == (m.shims["echo"].target.encode(), "echo", 1)
    if arg == "secret":
        assert rec.args[0].startswith(b"--password=") and b"hunter2" not in rec.args[0]
    else:
        assert rec.args == (value.encode(),)


@pytest.mark.parametrize("kind", ["dash", "bash-as-sh", "bash"])
def test_the_target_sees_the_callers_environment(home: Home, tmp_path: Path, kind: str) -> None:
    """Including `_` (dash once left the uptime in it), FUNCNEST put back, exported
    functions passed on as they came."""
    install(home, ["env"], _interp(kind, tmp_path))
    base = {
        "PATH": "/usr/bin:/bin",
        "PWD": str(tmp_path),
        "_": "/the/callers/underscore",
        "FUNCNEST": "7",
        "BASH_FUNC_f%%": "() { echo hi; }",
        "SHLVL": "3",
    }

    def env_of(argv: list[str]) -> dict[str, str]:
        out = subprocess.run(argv, env=base, cwd=tmp_path, capture_output=True, check=True)
        return dict(line.split("=", 1) for line in out.stdout.decode().splitlines())

    direct = env_of(["/usr/bin/env"])
    shimmed = env_of([str(home.loc.shim_dir / "env")])
    if kind == "dash":
        # dash passes on only variables whose names are valid (documented)
        assert direct.pop("BASH_FUNC_f%%") == "() { echo hi; }"
    else:
        # bash counts itself in SHLVL and exec counts back down (documented)
        assert shimmed.pop("SHLVL") == "3" and direct.pop("SHLVL") == "3"
    assert shimmed == direct


def test_install_renders_bash_shims_with_p(home: Home, tmp_path: Path) -> None:
    for kind in ("dash", "bash-as-sh", "bash"):
        interp = _interp(kind, tmp_path)
        install(home, ["echo"], interp)
        first = (home.loc.shim_dir / "echo").read_text().splitlines()[0]
        assert first == f"#!{interp}" + ("" if kind == "dash" else " -p")


def test_an_exported_shellopts_passes_without_privileged(home: Home, tmp_path: Path) -> None:
    """bash keeps SHELLOPTS readonly and rewrites it when exported: the caller's options do
    not reach the target through a bash shim (documented), but -p does not either."""
    install(home, ["env"], _interp("bash", tmp_path))
    env = {"PATH": "/usr/bin:/bin", "SHELLOPTS": "braceexpand:hashall:interactive-comments"}
    out = subprocess.run(
        [str(home.loc.shim_dir / "env")], env=env, capture_output=True, text=True, check=True
    )
    assert "SHELLOPTS=braceexpand:hashall:interactive-comments\n" in out.stdout
