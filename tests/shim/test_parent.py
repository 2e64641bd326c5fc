"""Parent evidence: a shell no shim recorded leaves its argv with its first child, exactly
(issue 27 item 8: dash's `read` dropped the NULs between the arguments), and scrubbed as the
child's own arguments are (issue 28 item 3)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from mcpshim.log import redact
from tests.fixtures.home import Home, install

GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _env(home: Home) -> dict[str, str]:
    return {**home.env, "PATH": f"{home.loc.shim_dir}:/usr/bin:/bin"}


def test_absolute_path_shell_line_is_kept_by_its_first_shimmed_child(
    home: Home, interpreter: str
) -> None:
    install(home, ["git"], interpreter)
    script = "git --version >/dev/null; git --version >/dev/null; cut -d' ' -f22 /proc/$$/stat"
    out = subprocess.run(
        ["/bin/sh", "-c", script], env=_env(home), capture_output=True, text=True, check=True
    )
    first, second = home.execs()
    assert first.parent_argv == (b"/bin/sh", b"-c", script.encode())
    assert first.parent_cmdline == b"/bin/sh -c " + script.encode()
    assert first.parent_start == int(out.stdout.strip())
    assert second.parent_cmdline == b"" and second.parent_argv == ()  # the marker says so
    assert first.ppid == second.ppid


@pytest.mark.parametrize("parent", ["dash", "bash", "sh"])
def test_the_parents_argv_keeps_every_boundary(home: Home, interpreter: str, parent: str) -> None:
    """Empty arguments, blanks, newlines, a byte that is not UTF-8 and `"$@"` stay what they
    were: the record holds the argv the shell was given, not a line."""
    shell = shutil.which(parent)
    if shell is None:
        pytest.skip(f"{parent} not installed")
    install(home, ["git"], interpreter)
    args = [b"a b", b"", b"x\ny", b"\xff", b"-c", b"  "]
    argv = [shell.encode(), b"-c", b'git --version "$@" >/dev/null; exit 0', b"sh", *args]
    subprocess.run(argv, env=_env(home), check=True)
    [rec] = home.execs()
    assert rec.parent_argv == tuple(argv)
    assert rec.args == (b"--version", *args)


def test_secrets_in_the_parents_argv_are_scrubbed_as_the_childs_are(
    home: Home, interpreter: str
) -> None:
    """The issue's example (`dash -c 'curl "$@"' sh ghp_...` kept the token raw), and a
    composed line with a quoted password and a header."""
    install(home, ["git"], interpreter)
    dash = shutil.which("dash") or "/bin/sh"
    argv = [dash, "-c", 'git "$@" >/dev/null; exit 0', "sh", GH, "--password", "hunter2"]
    subprocess.run(argv, env=_env(home), check=True)
    script = f"git --version >/dev/null; curl -H 'Authorization: Bearer {GH}' x; : -p'hunter3 x'"
    subprocess.run(["/bin/sh", "-c", script], env=_env(home), check=True)
    first, second = home.execs()
    raw = home.loc.log_file.read_bytes()
    assert GH[4:].encode() not in raw and b"hunter2" not in raw and b"hunter3" not in raw
    for rec, parent in ((first, argv), (second, ["/bin/sh", "-c", script])):
        want = redact.redact_argv([a.encode() for a in parent])
        assert rec.parent_argv == want.argv
        assert set(want.rules) <= set(rec.redactions)
    assert first.parent_argv[4:] == (
        b"ghp_[REDACTED:github-token]",
        b"--password",
        b"[REDACTED:option-value]",
    )


def test_a_non_shell_parent_is_not_read(home: Home, interpreter: str) -> None:
    install(home, ["git"], interpreter)
    code = "import subprocess; subprocess.run(['git', '--version'], stdout=subprocess.DEVNULL)"
    subprocess.run([sys.executable, "-c", code], env=_env(home), check=True)
    [rec] = home.execs()
    assert rec.parent_cmdline == b"" and rec.parent_start is None and rec.parent_argv == ()


def test_the_helper_that_reads_the_argv_is_mcpshims_not_the_familys(home: Home) -> None:
    """The parent path's subprocess (xargs and the sh it starts) only prints the arguments
    back: traced, its execs are marked and no reader shows them (tree, review, coverage)."""
    from mcpshim.log import shimhelper
    from tests.fixtures.runhelp import events, needs_trace, only_session, run

    if needs_trace.args[0]:  # (skipif's condition)
        pytest.skip(needs_trace.kwargs["reason"])
    install(home, ["git"])
    done = run(home, ["/bin/sh", "-c", "git --version >/dev/null; exit 0"], "--trace",
               capture_output=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    sid = only_session(home)
    helpers = [e for e in events(home, "trace-exec", sid) if e.get("shim_helper")]
    assert {e["argv"][0] for e in helpers} >= {"/bin/sh"}
    [rec] = home.execs()
    assert rec.parent_argv == (b"/bin/sh", b"-c", b"git --version >/dev/null; exit 0")
    argvs = [a for e in helpers for a in e["argv"]]
    tree = subprocess.run(
        [sys.executable, "-m", "mcpshim", "tree", "--dir", str(home.loc.shim_dir), "--session",
         sid, "--format", "json"], env=home.env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "xargs" not in tree and "printf" not in tree and shimhelper.HELPER_XARGS[3] not in tree
    assert argvs and "git" in tree
