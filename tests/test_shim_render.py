"""The generated scripts themselves: shellcheck-clean POSIX sh, values only via shlex.quote."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mcpshim.errors import UsageError
from mcpshim.shim import render

ODD = '/opt/it\'s a "dir" $(touch /tmp/pwned) `x`/bin/git'


def test_values_enter_the_script_only_quoted(tmp_path: Path) -> None:
    text = render.render_shim("git", ODD, str(tmp_path / "log dir;rm -rf x"), "refuse", "/bin/sh")
    assert text.startswith("#!/bin/sh\n")
    assert render.MARKER in text.splitlines()[1]
    assert 'exec \'/opt/it\'"\'"\'s a "dir" $(touch /tmp/pwned) `x`/bin/git\' "$@"' in text
    # the script parses, and nothing in the values ran
    subprocess.run(["dash", "-n"], input=text.encode(), check=True)
    assert not Path("/tmp/pwned").exists()


@pytest.mark.parametrize(
    ("name", "target", "log"),
    [
        ("../x", "/bin/true", "/l"),
        ("git", "relative", "/l"),
        ("git", "/bin/true", "rel"),
        ("-x", "/bin/true", "/l"),
        ("git", "/bin/true\n", "/l"),
    ],
)
def test_bad_values_are_refused(name: str, target: str, log: str) -> None:
    with pytest.raises(UsageError):
        render.render_shim(name, target, log)


def test_shellcheck_clean(tmp_path: Path) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (CI installs it: scripts/system-deps.sh)")
    shim = tmp_path / "git"
    shim.write_text(
        render.render_shim(
            "git", "/usr/bin/git", "/var/log/mcpshim", "run", "/bin/sh", None, ["/bin/bash"]
        )
    )
    scrub = tmp_path / "lib.sh"
    scrub.write_text(render.render_lib())
    # SC2059: the format string is built from fixed pieces only (the values go to %s);
    # SC1090/SC1091/SC2034/SC2154: the library is sourced from a path fixed at install
    # time and shares variables with the shim.
    for f, extra in ((shim, []), (scrub, ["-e", "SC2034,SC2154"])):
        out = subprocess.run(
            ["shellcheck", "-s", "sh", "-e", "SC2059,SC1090,SC1091", *extra, str(f)],
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stdout


def test_triggers_cover_every_rule_prefix_and_option() -> None:
    from mcpshim.log import redact

    case = f"case $1 in {redact.sh_triggers()}) echo hit ;; *) echo miss ;; esac"
    samples = [f"x{p}y" for r in redact.TOKEN_RULES for p in r.prefixes]
    samples += ["https://u:p@h/"] + [n for n in redact.OPTION_NAMES]
    samples += [f"{n}=v" for n in redact.OPTION_NAMES]
    for shell in ("dash", "bash"):
        if shutil.which(shell) is None:
            continue
        for sample in samples:
            out = subprocess.run(
                [shell, "-c", case, "sh", sample], capture_output=True, text=True, check=True
            ).stdout
            assert out == "hit\n", (shell, sample)
        out = subprocess.run(
            [shell, "-c", case, "sh", "--version"], capture_output=True, text=True, check=True
        ).stdout
        assert out == "miss\n"
