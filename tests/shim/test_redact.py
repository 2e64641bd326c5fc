"""No secret reaches disk: the shim's sh scrubber and redact.py agree byte for byte."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

from mcpshim.log import redact
from tests.fixtures.home import Home, dash_path, install

GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SECRETS = {
    "ghp": GH,
    "gho": "gho_" + "x" * 36,
    "ghu": "ghu_" + "Y" * 36,
    "ghs": "ghs_" + "z1" * 18,
    "ghr": "ghr_" + "Q" * 36,
    "pat": "github_pat_11ABCDEFG0" + "a_b" * 20,
    "openai": "sk-proj-" + "Ab3" * 16,
    "anthropic": "sk-ant-api03-" + "Zz9_" * 20,
    "slack": "xoxb-123456789012-1234567890123-" + "AbCd" * 6,
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "aws-sts": "ASIAY34FZKBOKMUTVV7A",
    "gitlab": "glpat-" + "a1B2c3D4e5F6g7H8i9J0",
    "npm": "npm_" + "a" * 36,
    "google": "AIza" + "SyD-" * 9,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "password": "hunter2-correct-horse",
    "bearer": "abc.def-ghi_jkl123",
    "basic": "dXNlcjpwYXNzd29yZA==",
}

CORPUS: list[bytes] = [
    GH.encode(),
    f"token={GH}".encode(),
    f"https://x-access-token:{SECRETS['ghs']}@github.com/o/r.git".encode(),
    f"curl -H 'Authorization: Bearer {SECRETS['bearer']}' https://api.example".encode(),
    f"Authorization: Basic {SECRETS['basic']}".encode(),
    SECRETS["gho"].encode(),
    SECRETS["ghu"].encode(),
    f"x {SECRETS['ghr']} y".encode(),
    SECRETS["pat"].encode(),
    f"OPENAI_API_KEY={SECRETS['openai']}".encode(),
    SECRETS["anthropic"].encode(),
    SECRETS["slack"].encode(),
    f"aws_access_key_id={SECRETS['aws']}".encode(),
    SECRETS["aws-sts"].encode(),
    SECRETS["gitlab"].encode(),
    f"//registry.npmjs.org/:_authToken={SECRETS['npm']}".encode(),
    f"key={SECRETS['google']}".encode(),
    SECRETS["jwt"].encode(),
    f"https://user:{SECRETS['password']}@db.example:5432/app".encode(),
    b"--password",
    SECRETS["password"].encode(),
    f"--token={SECRETS['password']}".encode(),
    b"--api-key",
    b"k-" + SECRETS["password"].encode(),
    f"--secret={SECRETS['password']}".encode(),
    f"sh -c 'git push https://u:{SECRETS['password']}@h/r; echo {GH}'".encode(),
    # look-alikes that must stay untouched
    b"task-list-abcdefghijklmnopqrstuvwxyz",
    b"disk-usage",
    b"ghp_short",
    b"https://example.com:8443/path@v1",
    b"--tokenizer=fast",
    b"npm_config_cache",
]


def _secret_values() -> list[bytes]:
    vals = [v.encode() for v in SECRETS.values()]
    # the parts after a known prefix are what must never appear
    vals += [GH[4:].encode(), SECRETS["openai"][8:].encode()]
    return vals


def test_python_redaction_removes_every_secret() -> None:
    red = redact.redact_argv(CORPUS)
    blob = b"\n".join(red.argv)
    for secret in _secret_values():
        assert secret not in blob, secret
    for lookalike in CORPUS[-6:]:
        assert lookalike in red.argv


def test_shim_log_bytes_hold_no_secret_and_match_python(home: Home, interpreter: str) -> None:
    install(home, ["true"], interpreter)
    subprocess.run(
        [os.fsencode(home.loc.shim_dir / "true"), *CORPUS], env=home.env, check=True, timeout=60
    )
    raw = home.loc.log_file.read_bytes()
    for secret in _secret_values():
        assert secret not in raw, secret
    [rec] = home.execs()
    expected = redact.redact_argv(CORPUS)
    assert rec.args == expected.argv
    assert set(rec.redactions) == set(expected.rules)
    assert {"github-token", "api-key", "url-password", "option-value", "authorization"} <= set(
        rec.redactions
    )


def test_scrubber_missing_redacts_whole_arguments(home: Home, interpreter: str) -> None:
    install(home, ["true"], interpreter)
    (home.loc.shim_dir / ".mcpshim-lib.sh").unlink()
    subprocess.run(
        [os.fsencode(home.loc.shim_dir / "true"), b"ok", GH.encode()],
        env=home.env,
        check=True,
        timeout=30,
    )
    raw = home.loc.log_file.read_bytes()
    assert GH.encode() not in raw
    [rec] = home.execs()
    assert rec.redactions == ("scrubber-missing",)


@pytest.mark.parametrize("parent", ["python", "dash", "bash"])
def test_without_its_library_the_shim_still_passes_the_arguments_on(
    home: Home, interpreter: str, parent: str
) -> None:
    # The record keeps none of the arguments' text; the target still gets every one.
    install(home, ["echo"], interpreter)
    (home.loc.shim_dir / ".mcpshim-lib.sh").unlink()
    argv = [str(home.loc.shim_dir / "echo"), "ok", GH, "a  b"]
    if parent != "python":
        argv = [parent, "-c", '"$@"', "sh", *argv]
    out = subprocess.run(argv, env=home.env, capture_output=True, check=True, timeout=30)
    assert out.stdout == f"ok {GH} a  b\n".encode()
    assert GH.encode() not in home.loc.log_file.read_bytes()
    [rec] = home.execs()
    assert rec.args == (b"[REDACTED:scrubber-missing]",) * 3
    assert rec.redactions == ("scrubber-missing",)


def _cpu_seconds(argv: list[bytes | str], env: dict[str, str]) -> float:
    """CPU time (user + system) of a run that must finish within 60 s (load-proof)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, check=True, timeout=60, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


HOSTILE = {
    # every argument rebuilt the list (`set -- "$@" x`): 15,000 took 57 s
    "10,000 arguments and a token": [f"arg{i}" for i in range(10000)] + [GH],
    # every ` sk-` re-copied the rest of the string: 56 s
    "4 x 128 KiB of ' sk-'": [" sk-" * 32767] * 4,
    # the text before one token stripped with ${v#"$before"}: quadratic in its length
    "a token after 128 KiB": ["x" * 130000 + " " + GH],
    # the trigger `*://*:*@*` backtracked (cubic) on every argument of every exec
    "'://' 40,000 times": ["://" * 40000],
}


@pytest.mark.parametrize("shape", HOSTILE, ids=list(HOSTILE))
def test_scrubbing_takes_linear_time(home: Home, interpreter: str, shape: str) -> None:
    install(home, ["true"], interpreter)
    args = HOSTILE[shape]
    cpu = _cpu_seconds([os.fsencode(home.loc.shim_dir / "true"), *args], home.env)
    # the bound for the first; the others took a minute, and now about 0.1 to 0.5 s
    assert cpu < (1.0 if shape.startswith("10,000") else 2.0), (shape, cpu)
    [rec] = home.execs()
    want = redact.redact_argv([a.encode() for a in args])
    assert rec.args == want.argv
    spills = b"".join(f.read_bytes() for f in home.loc.spill_dir.glob("*"))
    assert GH[4:].encode() not in home.loc.log_file.read_bytes() + spills


@pytest.mark.parametrize("kind", ["dash", "bash-as-sh", "bash"])
def test_scrubbing_leaves_the_targets_environment_alone(
    home: Home, tmp_path: Path, kind: str
) -> None:
    """The scrubber's many variables (and its array under bash) are the shim's own: with a
    secret-shaped argument, and the parent shell's line scrubbed too, the target still sees
    exactly the caller's environment, `_` included."""
    interp = dash_path() if kind == "dash" else shutil.which("bash")
    if interp is None:
        pytest.skip("bash not installed")
    if kind == "bash-as-sh":
        (tmp_path / "b").mkdir()
        (tmp_path / "b" / "sh").symlink_to(interp)
        interp = str(tmp_path / "b" / "sh")
    install(home, ["env"], interp)
    base = {"PATH": "/usr/bin:/bin", "PWD": str(tmp_path), "_": "/the/callers/underscore"}
    base |= {"LC_ALL": "C.UTF-8", "SHLVL": "3"}
    # (env takes them as assignments and prints them: the same either way)
    args = ["A=--password=hunter2", f"B=https://u:{GH}@h/x", "C=sh -c 'curl -u a:b x'"]
    direct, shimmed = (
        subprocess.run(
            [cmd, *args], env=base, cwd=tmp_path, capture_output=True, check=True
        ).stdout.splitlines()
        for cmd in ("/usr/bin/env", str(home.loc.shim_dir / "env"))
    )
    assert sorted(shimmed) == sorted(direct)  # (bash's SHLVL: counted up, and down by exec)
    [rec] = home.execs()
    assert {"credential-name", "github-token", "option-value"} <= set(rec.redactions)


def test_quoted_values_in_a_composed_line_lose_every_secret(
    home: Home, tmp_path: Path, interpreter: str
) -> None:
    """Issue 28 item 4, its very line: five passwords in single quotes, only an unquoted
    `--user=admin:Pw6` was caught. The line reaches the log twice: as the `-c` argument a
    shimmed shell got, and as the argv of the parent shell its first shimmed child kept."""
    from mcpshim.shim import install as shim_install

    names = ["sh", "mysql", "sshpass", "curl", "redis-cli"]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for n in names:
        (bindir / n).write_text("#!/bin/sh\nexit 0\n")
        (bindir / n).chmod(0o755)
    targets = {n: str(bindir / n) for n in names}
    shim_install.install(home.loc, [], targets, interpreter=interpreter, allow_unsafe=True)
    pw = [f"Pw{i}-s3cr3t-{'x' * i}" for i in range(1, 8)]
    line = (
        f"mysql -u root -p'{pw[0]}'; sshpass -p '{pw[1]}' ssh h; curl -u 'admin:{pw[2]}' "
        f"https://x; redis-cli -a '{pw[3]}'; export DB_PASSWORD='{pw[4]}'; "
        f'curl --user=admin:{pw[5]} https://y; API_TOKEN="{pw[6]} \\" b" true'
    )
    shims = home.loc.shim_dir
    script = line.replace("mysql ", f"{shims}/mysql ").replace("sshpass ", f"{shims}/sshpass ")
    script = script.replace("curl ", f"{shims}/curl ").replace("redis-cli ", f"{shims}/redis-cli ")
    subprocess.run([str(shims / "sh"), "-c", line], env=home.env, check=True, timeout=60)
    subprocess.run(["/bin/sh", "-c", script], env=home.env, check=True, timeout=60)
    raw = home.loc.log_file.read_bytes()
    assert [p for p in pw if p.encode() in raw] == []
    recs = home.execs()
    assert recs[0].args == redact.redact_argv([b"-c", line.encode()]).argv
    mysql = next(r for r in recs if r.shim == "mysql")
    assert mysql.parent_argv == redact.redact_argv([b"/bin/sh", b"-c", script.encode()]).argv
    assert b"ssh h;" in mysql.parent_argv[2] and b"https://x;" in mysql.parent_argv[2]
