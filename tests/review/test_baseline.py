from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from mcpshim.cli import main
from mcpshim.errors import InputError
from mcpshim.family import tree
from mcpshim.review import baseline
from tests.fixtures.home import Home
from tests.fixtures.reviewkit import Lab, ids, of

DRIFT = {"MCS115", "MCS116", "MCS117"}


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    out, err = capsys.readouterr()
    code = exit_.value.code
    return (code if isinstance(code, int) else 0), out, err


def test_round_trip(home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab = Lab(home)
    lab.install("sh", "git")
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    lab.run(["sh", "-c", "git --version"], cwd=work, session="routine", check=True)
    lab.run(["git", "status"], cwd=work / "sub", session="routine")
    lab.run(["git", "log"], cwd="/", session="other")
    out_file = tmp_path / "base.toml"
    code, out, _ = _main(capsys, "baseline", "save", "--session", "routine", "-o", str(out_file))
    assert code == 0 and "wrote" in out
    loaded = baseline.load_baseline(out_file)
    collected = baseline.collect(tree.images(home.records(), "routine"), "routine")
    assert loaded.executables == collected.executables
    assert loaded.shapes == collected.shapes
    assert loaded.cwd_roots == collected.cwd_roots == (str(work),)  # sub is under work
    assert loaded.session == "routine" and loaded.records == 3
    assert loaded.shapes["sh"] == ("-c git",)
    assert set(loaded.shapes["git"]) == {"", "status"}  # git --version has no subcommand


def test_review_against_its_own_baseline_is_clean(home: Home, tmp_path: Path) -> None:
    lab = Lab(home)
    lab.install("sh", "git")
    lab.run(["sh", "-c", "git status; git --version"], cwd=tmp_path, check=False)
    base = baseline.collect(tree.images(home.records()))
    f = tmp_path / "b.toml"
    baseline.save_baseline(base, f)
    assert not DRIFT & ids(lab.review(baseline=baseline.load_baseline(f)))


def test_drift_findings(home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab = Lab(home)
    lab.install("sh", "git", "ssh")
    work = tmp_path / "work"
    work.mkdir()
    lab.run(["git", "status"], cwd=work, session="approved")
    f = tmp_path / "b.toml"
    _main(capsys, "baseline", "save", "--session", "approved", "-o", str(f))
    lab.run(["git", "status"], cwd=work, session="today")  # same as the baseline
    lab.run(["git", "push", "https://127.0.0.1:1/x"], cwd=work, session="today")  # new shape
    lab.run(["ssh", "-G", "127.0.0.1"], cwd=work, session="today")  # new executable
    lab.run(["git", "status"], cwd="/", session="today")  # new cwd
    found = lab.review(session="today", baseline=baseline.load_baseline(f))
    [shape] = of(found, "MCS116")
    assert shape.evidence[0].data["shape"] == "push"
    [new_exec] = of(found, "MCS115")
    assert new_exec.evidence[0].data["command"] == "ssh"
    [cwd] = of(found, "MCS117")
    assert cwd.evidence[0].data["cwd"] == "/"
    code, out, _ = _main(
        capsys, "review", "--session", "today", "--baseline", str(f), "--format", "json"
    )
    assert code == 1 and '"MCS116"' in out


def test_malformed_baseline(tmp_path: Path) -> None:
    f = tmp_path / "b.toml"
    f.write_text("version = 1\n[commands.git]\ntargets = 'x'\n")
    with pytest.raises(InputError, match=r"commands\.git\.targets"):
        baseline.load_baseline(f)
    f.write_text("version = 2\n")
    with pytest.raises(InputError, match="version"):
        baseline.load_baseline(f)


def test_save_refuses_an_empty_session(
    home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Lab(home).install("git")
    Lab(home).run(["git", "--version"])
    code, _, err = _main(
        capsys, "baseline", "save", "--session", "nope", "-o", str(tmp_path / "b.toml")
    )
    assert code == 2 and "no records" in err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("version = 1\n[commands.git]\ntargets = 'x'\n",
         "3: baseline key commands.git.targets: expected a list of strings"),
        ("version = 1\n[commands.git]\ntargets = ['a']\nshapes = [1]\n",
         "4: baseline key commands.git.shapes: expected a list of strings"),
        ("version = 1\ncommands = 3\n", "2: baseline key commands: expected a table"),
        ("version = 1\n[commands]\ngit = 3\n", "3: baseline key commands.git: expected a table"),
        ("version = 1\ncwd_roots = ['a', 2]\nsession = 4\n",
         "3: baseline key session: expected a string"),
        ("version = 1\nrecords = true\n", "2: baseline key records: expected a whole number"),
        ("version = 1\ncreated = 'x'\n", "2: baseline key created: expected a date and time"),
        ("version = 1\ncwd_roots = 'x'\n", "2: baseline key cwd_roots: expected a list of strings"),
        ("version = 2\n", "1: baseline key version: expected 1"),
    ],
)  # fmt: skip
def test_a_malformed_baseline_is_said_as_before(tmp_path: Path, text: str, said: str) -> None:
    """Read through the lock's reader (contract.lockfile.Reader), each error still names the
    file, the line and the key, word for word as the baseline's own reader said it."""
    f = tmp_path / "b.toml"
    f.write_text(text)
    with pytest.raises(InputError) as err:
        baseline.load_baseline(f)
    assert str(err.value) == f"{f}:{said}"


def test_a_baseline_is_written_as_the_lock_is(tmp_path: Path) -> None:
    """The same bytes as before for what a terminal shows as it is; what a terminal or a diff
    would act on (U+202E, which reverses the text after it; U+0085) is escaped as the lock
    escapes it, and a byte that was not UTF-8 kept as \\xNN text; reading gives it back."""
    base = baseline.Baseline(
        {"git": ("/usr/bin/git", "/x\udcff")},
        {"git": ("", "status"), "x": ("a\u202eb",)},
        ("/w", "/a\u0085b"),
        "s1",
        created=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
        records=7,
    )
    text = baseline.dumps_baseline(base)
    assert text == (
        "# mcpshim baseline: what an approved session ran. `mcpshim review --baseline FILE`\n"
        "# reports executables, subcommands/argument shapes and cwds outside it as drift.\n"
        'version = 1\nsession = "s1"\nrecords = 7\n'
        'cwd_roots = [\n    "/w",\n    "/a\\u0085b",\n]\n'
        "created = 2026-01-02 03:04:05+00:00\n\n"
        '[commands.git]\ntargets = [\n    "/usr/bin/git",\n    "/x\\\\xff",\n]\n'
        'shapes = [\n    "",\n    "status",\n]\n\n'
        '[commands.x]\ntargets = []\nshapes = [\n    "a\\u202eb",\n]\n'
    )
    f = tmp_path / "b.toml"
    baseline.save_baseline(base, f)
    got = baseline.load_baseline(f)
    assert got.shapes["x"] == ("a\u202eb",) and got.cwd_roots == ("/w", "/a\u0085b")
    assert got.executables["git"] == ("/usr/bin/git", "/x\\xff")
