"""Parent evidence: a shell no shim recorded leaves its composed line with its first child."""

from __future__ import annotations

import subprocess
import sys

from mcpshim.log import redact
from tests.fixtures.home import Home, install


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
    assert first.parent_cmdline == b"/bin/sh-c" + script.encode()
    assert first.parent_start == int(out.stdout.strip())
    assert second.parent_cmdline == b""  # the marker says it is on record already
    assert first.ppid == second.ppid


def test_a_non_shell_parent_is_not_read(home: Home, interpreter: str) -> None:
    install(home, ["git"], interpreter)
    code = "import subprocess; subprocess.run(['git', '--version'], stdout=subprocess.DEVNULL)"
    subprocess.run([sys.executable, "-c", code], env=_env(home), check=True)
    [rec] = home.execs()
    assert rec.parent_cmdline == b"" and rec.parent_start is None


def test_secrets_in_the_parent_line_are_scrubbed_like_python_does(
    home: Home, interpreter: str
) -> None:
    install(home, ["git"], interpreter)
    token = "ghp_" + "S" * 36
    script = (
        f"git --version >/dev/null; curl -H 'Authorization: Bearer {token}' x; : --password hunter2"
    )
    subprocess.run(["/bin/sh", "-c", script], env=_env(home), check=True)
    [rec] = home.execs()
    raw = home.loc.log_file.read_bytes()
    assert token.encode() not in raw and b"hunter2" not in raw
    expected, rules = redact.redact_joined(b"/bin/sh-c" + script.encode())
    assert rec.parent_cmdline == expected
    assert set(rules) <= set(rec.redactions)
