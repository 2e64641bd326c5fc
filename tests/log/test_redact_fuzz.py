"""The shell scrubber and the Python writers agree byte for byte on seeded random text built
from the pieces the rules look for (prefixes, anchors, heads, blanks, quotes, backslashes,
markers), not only on the corpus: the sh follows redact's algorithm by another route
(splitting at each rule's anchor, a shell word's quotes found step by step), and this is
where the two could drift apart. The parent's argv goes through the helper the shims run
for it (_mcpshim_pargv), as execlog reads it back."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from mcpshim.log import redact
from mcpshim.log.parentfield import parent_fields
from mcpshim.log.redact_sh import HELPER_SCRIPT
from mcpshim.shim.render import render_lib

PIECES = [
    "sk-", "ghp_", "gh", "p_", "github_pat_", "xoxb-", "AKIA", "AIza", "eyJ", "glpat-", "npm_",
    ":", "//", "://", "@", "@@", "=", "token", "Token", "TOKEN", "pass", "password", "Bearer ",
    "bearer\t", "BEARER ", " ", "  ", "\t", "\n", '"', "'", "-", "--", "a", "A", "1", "9", "_",
    ".", "/", "PRIVATE KEY-----", "-----", " BLOCK", "curl", " -u ", " -u", "-su ", "mysql",
    " -p", " -p ", "secret_access_key", "key", "Key", "api_key", "apiKey", "x", "abcdefghij",
    "ABCDEFGHIJKLMNOP", "0123456789", "Authorization:", "authorization: ", "X-Api-Key:",
    '"token": "', '":"', "?token=", "&", ";", "|", "8443/", "12/", ":1", "GH_PAT=", "_auth=",
    "--user ", "u:p", "ssh", "-p", "-uuser:pw", "--password", "--no-password", "-psecret",
    "AWS_CA_BUNDLE=/x", "é", "\x80", "[REDACTED:x]", "https://", "://u:p@", "p@ss/w",
    "MYSQL_PWD=", "xToken=", "bYpass=", "redis-cli", " -a ", "sshpass",
    "$'", "\\", "\\'", '\\"', "'a b'", '"c d"', "$'e\\'f'", "=$", "-p'", "sk_live_", "hf_",
    "SG.", "xapp-", "dop_v1_", "hvs.", "shpat_", "pypi-AgEIcHlwaS5vcmc", "hooks.slack.com",
    "/services/T", "12345:AA", "AGE-SECRET-KEY-1", "key-", "Cookie: ", "a=1; b=2", "sig=",
    "&sig=", "ssh-keygen", " -N ", "htpasswd", " -b ", " -nb ", "MTk4NjIyNDgzNDcxOTI1MjQ4",
    "ABCDEFGHIJKLMNOPQRSTUVWX", ".", "~", "8Q~", "0123456789abcdef", "AC", "SK",
]  # fmt: skip
COMMANDS = [
    "/usr/bin/true", "/usr/bin/curl", "/usr/bin/mysql", "/usr/bin/sshpass", "/bin/git",
    "/usr/bin/ssh-keygen", "/usr/bin/htpasswd",
]  # fmt: skip

DRIVER = """LC_ALL=C
_mcpshim_nx='' _mcpshim_rr='' _mcpshim_r='' _mcpshim_bash=${BASH_VERSION:+1}
_mcpshim_tgt=$1
shift
. "$LIB"
_mcpshim_emit() { printf '%s\\0' "$@"; }
_mcpshim_redact "$@"
printf '%s\\0' "$_mcpshim_rr"
shift
_mcpshim_rr=''
_mcpshim_s=$(/bin/sh -p -c "$HELPER" sh "$@")
_mcpshim_pargv
printf '%s\\n%s' "$_mcpshim_rr" "$_mcpshim_pc"
"""


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 16)))


def _rules(raw: bytes) -> set[str]:
    return set(filter(None, raw.decode().split(",")))


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_sh_and_python_agree_on_random_text(tmp_path: Path, shell: str) -> None:
    path = shutil.which(shell)
    if path is None:
        pytest.skip(f"{shell} not installed")
    lib = tmp_path / "lib.sh"
    lib.write_text(render_lib())
    driver = tmp_path / "driver.sh"
    driver.write_text(DRIVER)
    rng = random.Random(14)
    for batch in range(40):
        command = rng.choice(COMMANDS)
        args = [_text(rng) for _ in range(rng.randint(2, 40))]
        out = subprocess.run(
            [path, str(driver), command, *args],
            env={"PATH": "/usr/bin:/bin", "LIB": str(lib), "HELPER": HELPER_SCRIPT},
            capture_output=True,
            timeout=120,
            check=True,
        ).stdout.split(b"\0")
        want = redact.redact_argv([a.encode() for a in args], command=Path(command).name)
        assert tuple(out[: len(args)]) == want.argv, (batch, command, args)
        assert _rules(out[len(args)]) == set(want.rules), (batch, args)
        # the parent's argv: the same arguments (less the first), as a shell's own
        rules, field = b"\0".join(out[len(args) + 1 :]).split(b"\n", 1)
        parent = [a.encode() for a in args[1:]]
        got = parent_fields(field)[1]
        assert got == redact.redact_argv(parent).argv, (batch, args)
        assert _rules(rules) == set(redact.redact_argv(parent).rules), (batch, args)
