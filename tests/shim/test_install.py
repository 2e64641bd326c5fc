"""install / uninstall / list / path through the real CLI, in an isolated HOME."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcpshim.shim import install, manifest, targets
from tests.fixtures.home import Home

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def cli(home: Home, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [*MCPSHIM, *args], env=home.env, capture_output=True, text=True, timeout=120
    )
    if check:
        assert out.returncode == 0, out.stderr
    return out


def test_default_set_installs_what_resolves_and_says_what_was_skipped(home: Home) -> None:
    out = cli(home, "install", check=True)
    for name in install.DEFAULT_COMMANDS:
        found = targets.resolve_target(name, targets.trusted_search_path(), home.loc.shim_dir)
        if found:
            assert f"installed {name} -> {found}" in out.stdout
            assert (home.loc.shim_dir / name).is_file()
        else:
            assert f"skipped {name}: not found" in out.stdout
    manifest = tomllib.loads((home.loc.shim_dir / "manifest.toml").read_text())
    git = manifest["shims"]["git"]
    first = shutil.which("git", path=":".join(targets.trusted_search_path()))
    assert first is not None and os.path.samefile(git["target"], first)
    # one spelling per file: through a directory that is not a link (merged /usr: /usr/bin)
    assert os.path.realpath(os.path.dirname(git["target"])) == os.path.dirname(git["target"])
    assert git["size"] == os.path.getsize(git["target"])
    assert len(git["sha256"]) == 64 and "installed" in git
    assert manifest["log_dir"] == str(home.loc.log_dir)


def test_targets_come_from_the_trusted_path_never_the_callers(home: Home, tmp_path: Path) -> None:
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "git").write_text("#!/bin/sh\necho evil\n")
    (evil / "git").chmod(0o755)
    env = {**home.env, "PATH": f"{evil}:{os.environ['PATH']}"}
    subprocess.run([*MCPSHIM, "install", "git"], env=env, check=True, capture_output=True)
    m = manifest.load_manifest(home.loc.shim_dir)
    assert m is not None and not m.shims["git"].target.startswith(str(evil))


def test_install_is_idempotent(home: Home) -> None:
    cli(home, "install", "git", check=True)
    shim = home.loc.shim_dir / "git"
    before = (shim.stat().st_mtime_ns, shim.read_bytes())
    out = cli(home, "install", "git", check=True)
    assert "unchanged git" in out.stdout
    assert (shim.stat().st_mtime_ns, shim.read_bytes()) == before


def test_never_overwrites_or_deletes_a_file_it_did_not_write(home: Home) -> None:
    home.loc.shim_dir.mkdir(parents=True)
    mine = home.loc.shim_dir / "git"
    mine.write_text("#!/bin/sh\n# my own wrapper\n")
    out = cli(home, "install", "git")
    assert out.returncode == 2
    assert "was not written by mcpshim" in out.stderr
    assert mine.read_text() == "#!/bin/sh\n# my own wrapper\n"
    cli(home, "install", "ssh", check=True)
    assert cli(home, "uninstall", "git").returncode == 2  # not ours: not in the manifest
    cli(home, "uninstall", "--all", check=True)
    assert mine.exists() and not (home.loc.shim_dir / "ssh").exists()


def test_explicit_target_and_unsafe_targets(home: Home, tmp_path: Path) -> None:
    copy = tmp_path / "mygit"  # tmp_path is under /tmp: a temporary directory
    shutil.copy2(shutil.which("git") or "/usr/bin/git", copy)
    out = cli(home, "install", "--target", f"git={copy}")
    assert out.returncode == 2 and "temporary directory" in out.stderr
    out = cli(home, "install", "--target", f"git={copy}", "--allow-unsafe-target", check=True)
    assert f"installed git -> {copy}" in out.stdout
    assert cli(home, "install", "--target", "git=relative/git").returncode == 2
    assert cli(home, "install", "--target", "nonsense").returncode == 2


def test_world_writable_directory_target_is_refused(home: Home) -> None:
    d = Path("/usr/local/lib/mcpshim-test-ww")
    try:
        d.mkdir(parents=True)
    except PermissionError:
        pytest.skip("needs a directory outside temp dirs (root in CI)")
    try:
        d.chmod(0o777)
        tool = d / "tool"
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
        out = cli(home, "install", "--target", f"tool={tool}")
        assert out.returncode == 2 and "group- or world-writable" in out.stderr
    finally:
        shutil.rmtree(d)


def test_target_in_the_shim_dir_is_refused(home: Home) -> None:
    cli(home, "install", "git", check=True)
    out = cli(
        home, "install", "--target", f"loop={home.loc.shim_dir / 'git'}", "--allow-unsafe-target"
    )
    assert out.returncode == 2 and "shim directory itself" in out.stderr


def test_list_reports_a_changed_target_and_exits_1(home: Home, tmp_path: Path) -> None:
    tool = tmp_path / "tool"
    tool.write_bytes(b"#!/bin/sh\necho one\n")
    tool.chmod(0o755)
    cli(home, "install", "--target", f"tool={tool}", "--allow-unsafe-target", check=True)
    out = cli(home, "list", check=True)
    assert "tool" in out.stdout and "ok" in out.stdout
    tool.write_bytes(b"#!/bin/sh\necho two\n")
    out = cli(home, "list")
    assert out.returncode == 1 and "target-changed" in out.stdout
    (home.loc.shim_dir / "tool").write_text((home.loc.shim_dir / "tool").read_text() + "#\n")
    out = cli(home, "list", "--format", "json")
    assert out.returncode == 1 and '"state": "shim-edited"' in out.stdout


def test_path_prints_sh_and_fish_lines(home: Home) -> None:
    sh = cli(home, "path", "--shell", "sh", check=True).stdout.strip()
    fish = cli(home, "path", "--shell", "fish", check=True).stdout.strip()
    assert sh == f'export PATH={home.loc.shim_dir}:"$PATH"'
    assert fish == f"set -gx PATH {home.loc.shim_dir} $PATH"
    got = subprocess.run(["sh", "-c", f'{sh}; printf %s "$PATH"'], capture_output=True, text=True)
    assert got.stdout.split(":")[0] == str(home.loc.shim_dir)


def test_uninstall_removes_only_its_own_files_and_keeps_the_log(home: Home) -> None:
    cli(home, "install", "git", "sh", check=True)
    subprocess.run(
        [str(home.loc.shim_dir / "git"), "--version"], env=home.env, check=True, capture_output=True
    )
    out = cli(home, "uninstall", "git", check=True)
    assert out.stdout.strip() == "removed git"
    assert (home.loc.shim_dir / "sh").exists()
    cli(home, "uninstall", "--all", check=True)
    assert sorted(p.name for p in home.loc.shim_dir.iterdir()) == []
    assert home.loc.log_file.stat().st_size > 0
    assert cli(home, "uninstall").returncode == 2


def test_every_command_has_help(home: Home) -> None:
    from mcpshim.cli import cli as group

    def walk(cmd: object, path: list[str]) -> list[list[str]]:
        import click

        assert isinstance(cmd, click.Command)
        out = [path]
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                out += walk(sub, [*path, name])
        return out

    for path in walk(group, []):
        res = cli(home, *path, "--help")
        assert res.returncode == 0, path
        assert "Usage:" in res.stdout and len(res.stdout.splitlines()) > 3, path


def test_a_rerun_without_arguments_keeps_a_target_pinned_with_target(
    home: Home, tmp_path: Path
) -> None:
    mine = tmp_path / "opt" / "git"  # under /tmp: a pin needs --allow-unsafe-target
    mine.parent.mkdir()
    shutil.copy2(shutil.which("git") or "/usr/bin/git", mine)
    cli(home, "install", check=True)
    cli(home, "install", "--target", f"git={mine}", "--allow-unsafe-target", check=True)
    shim, man = home.loc.shim_dir / "git", home.loc.shim_dir / "manifest.toml"
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (shim, man)}
    out = cli(home, "install", check=True)  # the default set: git among it
    assert "unchanged git" in out.stdout and "installed git" not in out.stdout
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (shim, man)} == before
    out = cli(home, "install", "git", check=True)  # named, without --target: kept too
    assert "unchanged git" in out.stdout
    m = manifest.load_manifest(home.loc.shim_dir)
    assert m is not None and m.shims["git"].target == str(mine) and m.shims["git"].pinned
    # a pin whose file is gone is said, not silently swapped for the searched target
    mine.unlink()
    out = cli(home, "install", check=True)
    assert f"skipped git: pinned with --target to {mine}, which is gone" in out.stdout
    assert shim.read_bytes() == before[shim][1]
    # --target again moves it
    searched = targets.resolve_target("git", targets.trusted_search_path(), home.loc.shim_dir)
    assert searched is not None
    out = cli(home, "install", "--target", f"git={searched}", check=True)
    assert f"installed git -> {searched}" in out.stdout
