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
    bash = tmp_path / "git-bash"  # with its bash-only part
    bash.write_text(
        render.render_shim(
            "git", "/usr/bin/git", "/var/log/mcpshim", "run", "/bin/bash", None, ["/bin/bash"], True
        )
    )
    scrub = tmp_path / "lib.sh"
    scrub.write_text(render.render_lib())
    # SC2059: the format string is built from fixed pieces only (the values go to %s);
    # SC1090/SC1091/SC2034/SC2154: the library is sourced from a path fixed at install
    # time and shares variables with the shim.
    for f, extra in ((shim, []), (bash, []), (scrub, ["-e", "SC2034,SC2154"])):
        out = subprocess.run(
            ["shellcheck", "-s", "sh", "-e", "SC2059,SC1090,SC1091", *extra, str(f)],
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stdout


def _instances() -> list[str]:
    """A shortest text each rule fires on, in lower and upper case where case is free."""
    from mcpshim.log.redact_rules import RULES, TextRule, glob_items

    out = ["https://u:p@h/"]
    for r in RULES:
        if not isinstance(r, TextRule):
            continue
        run = (r.body or next(c for c in "aZ9" if c not in r.stop))[0] * r.min_len
        scope = r.scope[0] + " " if r.scope else ""
        for h in r.heads:
            before = {"any": "", "word": " ", "sep": "_"}[h.before]
            for t in r.tails:
                text = "".join(c[0] for c in glob_items(h.glob)) + r.anchor
                text += "".join(c[0] for c in glob_items(t))
                for case in (str.lower, str.upper) if r.ci else (str,):
                    head, _, tail = text.rpartition(r.anchor)
                    out.append(f"{scope}x{before}{case(head)}{r.anchor}{case(tail)}{run} y")
    return out


def test_triggers_cover_every_rule() -> None:
    """Every text a rule changes, and every argument a whole-argument rule looks at, hits
    the shim's trigger and Python's quick check (both supersets of the rules)."""
    from mcpshim.log import redact, redact_sh

    texts = _instances()
    for text in texts:
        assert redact.redact_text(text.encode()) != text.encode(), text
        assert redact.might_hold_secret(text.encode()), text
    args = [*texts, "--password", "--x-token=v", "GITHUB_TOKEN=v", "aws_secret_access_key"]
    args += ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "mysql", "/usr/bin/curl"]
    curl = ["-u", "-uu:p", "-su", "--user=x", "--oauth2-bearer"]
    for shell in ("dash", "bash"):
        if shutil.which(shell) is None:
            continue
        for names, samples in ((("git",), args), (("curl",), curl)):
            case = (  # as shims/shim.sh has it
                f'case " $* " in {redact_sh.sh_triggers(*names)}) echo hit ;;'
                ' *@*) case "$*" in *://*) echo hit ;; *) echo miss ;; esac ;; *) echo miss ;; esac'
            )
            for sample in samples:
                out = subprocess.run(
                    [shell, "-c", case, "sh", "--version", sample],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                assert out == "hit\n", (shell, names, sample)
            # the common path stays common: a plain command, and a git object name (40
            # lowercase hex digits, which no bare 40-character AWS secret key is), which
            # git's plumbing passes at every turn (a native shim would hand each to sh,
            # which a contained session does not let run)
            for plain in (
                ["-C", "/tmp", "status"],
                ["cat-file", "-t", "88c7d67052e9" * 3 + "abcd"],
            ):
                out = subprocess.run(
                    [shell, "-c", case, "sh", "--version", *plain],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                assert out == "miss\n", (shell, names, plain)
