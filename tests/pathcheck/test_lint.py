"""The PATH corpus: every MCS20x rule, positive and negative, on real directories in tmp_path."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from mcpshim.pathcheck.facts import walk
from mcpshim.pathcheck.lint import LintSettings, Scope, lint_path, shadows
from mcpshim.review.findings import Finding

OTHER = 12345  # a uid and gid that is neither root nor us (tests run as root in CI)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


@dataclass(frozen=True)
class World:
    root: Path
    sysbin: Path  # a trusted "system" directory holding real executables
    shim: Path
    temp: Path
    settings: LintSettings

    def lint(self, *entries: str | Path, cwd: Path | None = None, **kw: object) -> list[Finding]:
        s = replace(self.settings, **kw)  # type: ignore[arg-type]
        value = ":".join(str(e) for e in entries)
        return lint_path(value, s, Scope("test"), str(cwd or self.root))[0]


def exe(path: Path, body: str = "#!/bin/sh\necho hi\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(0o755)
    return path


def mkdir(path: Path, mode: int = 0o755) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)
    return path


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    root = mkdir(tmp_path / "w")
    sysbin = mkdir(root / "sys" / "bin")
    for name in ("git", "ssh"):
        exe(sysbin / name)
    shim = mkdir(root / "shims")
    temp = mkdir(root / "scratch", 0o1777)
    settings = LintSettings(
        trusted_dirs=(str(sysbin),),
        temp_dirs=(str(temp),),
        sensitive_commands=("git", "ssh"),
        shim_dir=str(shim),
        shim_source="from --dir",
        owners=frozenset({0, os.geteuid()}),
    )
    yield World(root, sysbin, shim, temp, settings)


def hits(findings: list[Finding], rule: str) -> list[Finding]:
    return [f for f in findings if f.rule.id == rule]


def paths(findings: list[Finding], rule: str) -> list[str]:
    return [f.evidence[0].data["path"] for f in hits(findings, rule) if f.evidence]


# ---- MCS201 / MCS202: empty, '.', relative -------------------------------------------------


def test_empty_entries(world: World) -> None:
    for value, idx in ((f":{world.sysbin}", 0), (f"{world.sysbin}:", 1)):
        f = lint_path(value, world.settings, Scope("t"), str(world.root))[0]
        assert [x.evidence[0].data["index"] for x in hits(f, "MCS201")] == [idx]
    f = world.lint(world.shim, world.sysbin, "", world.sysbin)
    assert len(hits(f, "MCS201")) == 1
    assert hits(world.lint(world.shim, world.sysbin), "MCS201") == []


def test_dot_and_relative_entries(world: World) -> None:
    f = world.lint(world.shim, ".", "bin", "./tools", world.sysbin)
    assert paths(f, "MCS202") == [".", "bin", "./tools"]
    assert "current directory" in hits(f, "MCS202")[0].message
    assert hits(world.lint(world.shim, world.sysbin), "MCS202") == []


def test_dot_entry_wins_shadowing_relative_to_cwd(world: World) -> None:
    work = mkdir(world.root / "checkout")
    exe(work / "git")
    f = world.lint(world.shim, ".", world.sysbin, cwd=work)
    (sh,) = hits(f, "MCS209")
    assert f"{work}/git" in sh.message and f"hiding {world.sysbin}/git" in sh.message


# ---- MCS203: missing or not a directory -------------------------------------------------


def test_missing_and_not_a_directory(world: World) -> None:
    gone = world.root / "gone"
    afile = world.root / "afile"
    afile.write_text("x")
    f = world.lint(world.shim, gone, afile, world.sysbin)
    msgs = [x.message for x in hits(f, "MCS203")]
    assert msgs == [f"{gone} does not exist", f"{afile} is not a directory"]
    assert hits(world.lint(world.shim, world.sysbin), "MCS203") == []


def test_dangling_symlink_is_missing(world: World) -> None:
    link = world.root / "dangling"
    link.symlink_to(world.root / "nowhere")
    assert paths(world.lint(world.shim, link), "MCS203") == [str(link)]


# ---- MCS204: temporary directories -------------------------------------------------------


def test_temp_dir_directly_and_through_symlink(world: World) -> None:
    inside = mkdir(world.temp / "bin")
    link = world.root / "looks-safe"
    link.symlink_to(inside)
    f = world.lint(world.shim, inside, link, world.sysbin)
    assert paths(f, "MCS204") == [str(inside), str(link)]
    assert "reached through" in hits(f, "MCS204")[1].message
    assert hits(world.lint(world.shim, world.sysbin), "MCS204") == []


# ---- MCS205: writable, foreign-owned, or reached through such a symlink ---------------------


def test_world_writable_dir(world: World) -> None:
    d = mkdir(world.root / "open", 0o777)
    (f,) = hits(world.lint(world.shim, d), "MCS205")
    assert "world-writable (mode 0777)" in f.message


@needs_root
def test_group_writable_dir_of_a_shared_group(world: World) -> None:
    d = mkdir(world.root / "team", 0o775)
    os.chown(d, 0, OTHER)
    (f,) = hits(world.lint(world.shim, d), "MCS205")
    assert "group-writable" in f.message


def test_group_writable_private_group_is_fine(world: World) -> None:
    """root:root 0775 — the group is the owner's own private group (no other members)."""
    d = mkdir(world.root / "mine", 0o775)
    os.chown(d, os.geteuid(), os.getegid())
    import grp
    import pwd

    g = grp.getgrgid(os.getegid())
    if g.gr_name != pwd.getpwuid(os.geteuid()).pw_name or g.gr_mem:
        pytest.skip("this user has no private group")
    assert hits(world.lint(world.shim, d), "MCS205") == []


@needs_root
def test_owned_by_another_user(world: World) -> None:
    d = mkdir(world.root / "alice-bin")
    os.chown(d, OTHER, OTHER)
    (f,) = hits(world.lint(world.shim, d), "MCS205")
    assert f"{d} is owned by uid {OTHER}" in f.message


@needs_root
def test_parent_owned_by_another_user(world: World) -> None:
    home = mkdir(world.root / "home-alice")
    d = mkdir(home / "bin")
    os.chown(home, OTHER, OTHER)
    (f,) = hits(world.lint(world.shim, d), "MCS205")
    assert f"{home} is owned by uid {OTHER}" in f.message


def test_world_writable_parent_without_sticky(world: World) -> None:
    parent = mkdir(world.root / "drop", 0o777)
    d = mkdir(parent / "bin")
    (f,) = hits(world.lint(world.shim, d), "MCS205")
    assert f"{parent} is world-writable" in f.message and "holds bin" in f.message


def test_sticky_parent_with_our_own_child_is_fine(world: World) -> None:
    d = mkdir(world.temp / "ours")
    assert hits(world.lint(world.shim, d), "MCS205") == []  # MCS204 still fires


@needs_root
def test_sticky_parent_with_foreign_child(world: World) -> None:
    d = mkdir(world.temp / "theirs")
    os.chown(d, OTHER, OTHER)
    (f,) = hits(world.lint(world.shim, d), "MCS205")
    assert "owned by uid 12345" in f.message


def test_missing_entry_in_writable_dir_can_be_created_by_anyone(world: World) -> None:
    (f,) = hits(world.lint(world.shim, world.temp / "later"), "MCS205")
    assert "anyone who can write there can create it" in f.message


def test_symlink_in_writable_dir_to_a_safe_dir(world: World) -> None:
    """The target is fine, but the link lives where anyone can replace it."""
    drop = mkdir(world.root / "drop", 0o777)
    link = drop / "bin"
    link.symlink_to(world.sysbin)
    (f,) = hits(world.lint(world.shim, link), "MCS205")
    assert f"{drop} is world-writable" in f.message
    assert f"reached through {link} -> {world.sysbin}" in f.message


@needs_root
def test_symlink_chain_target_parent_owned_by_another_user(world: World) -> None:
    theirs = mkdir(world.root / "theirs")
    real = mkdir(theirs / "bin")
    os.chown(theirs, OTHER, OTHER)
    hop = world.root / "hop"
    hop.symlink_to(real)
    link = world.root / "link"
    link.symlink_to("hop")  # relative link -> absolute link -> directory
    chain = walk(str(link))
    assert [a for a, _ in chain.symlinks] == [str(link), str(hop)]
    (f,) = hits(world.lint(world.shim, link), "MCS205")
    assert f"{theirs} is owned by uid {OTHER}" in f.message


def test_safe_dirs_are_not_writable_findings(world: World) -> None:
    link = world.root / "alias"
    link.symlink_to(world.sysbin)
    assert hits(world.lint(world.shim, world.sysbin, link), "MCS205") == []


# ---- MCS206: project-local directories ahead of the system ones ----------------------------


def test_project_dirs_before_system(world: World) -> None:
    nm = mkdir(world.root / "app" / "node_modules" / ".bin")
    venv = world.root / "venv"
    mkdir(venv / "bin")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    proj = mkdir(world.root / "proj")
    mkdir(proj / ".git")
    pbin = mkdir(proj / "bin")
    f = world.lint(world.shim, nm, venv / "bin", pbin, world.sysbin)
    assert paths(f, "MCS206") == [str(nm), str(venv / "bin"), str(pbin)]
    assert "node_modules/.bin" in hits(f, "MCS206")[0].message
    assert "virtualenv" in hits(f, "MCS206")[1].message
    assert "writable checkout" in hits(f, "MCS206")[2].message
    after = world.lint(world.shim, world.sysbin, nm, venv / "bin", pbin)
    assert hits(after, "MCS206") == []


def test_hidden_tool_checkout_is_not_a_project(world: World) -> None:
    tool = mkdir(world.root / ".pyenv")
    mkdir(tool / ".git")
    tbin = mkdir(tool / "bin")
    plain = mkdir(world.root / "opt" / "bin")
    assert hits(world.lint(world.shim, tbin, plain, world.sysbin), "MCS206") == []


# ---- MCS207: shim dir missing or not first ---------------------------------------------------


def test_shim_dir_missing_not_first_first(world: World) -> None:
    (missing,) = hits(world.lint(world.sysbin), "MCS207")
    assert f"{world.shim} (from --dir) is not on PATH" in missing.message
    (late,) = hits(world.lint(world.sysbin, world.shim), "MCS207")
    assert f"is PATH[1], after {world.sysbin}" in late.message
    assert hits(world.lint(world.shim, world.sysbin), "MCS207") == []
    alias = world.root / "shim-alias"
    alias.symlink_to(world.shim)
    assert hits(world.lint(alias, world.sysbin), "MCS207") == []


# ---- MCS208: duplicates -------------------------------------------------------------------


def test_duplicates(world: World) -> None:
    f = world.lint(world.shim, world.sysbin, f"{world.sysbin}/")
    assert [x.message for x in hits(f, "MCS208")] == [f"PATH[2] {world.sysbin}/ repeats PATH[1]"]
    assert hits(world.lint(world.shim, world.sysbin), "MCS208") == []


# ---- MCS209: shadowing ---------------------------------------------------------------------


def test_shadowing_winner_and_hidden(world: World) -> None:
    evil = mkdir(world.root / "evil")
    exe(evil / "git")
    (evil / "ssh").write_text("not executable")
    f = world.lint(world.shim, evil, world.sysbin)
    (sh,) = hits(f, "MCS209")
    assert sh.message == (
        f"git resolves to {evil}/git (not a trusted directory), hiding {world.sysbin}/git"
    )
    assert sh.evidence[0].data == {"command": "git", "path": str(evil), "index": 1}
    assert hits(world.lint(world.shim, world.sysbin, evil), "MCS209") == []


def test_untrusted_winner_that_hides_nothing_still_flagged(world: World) -> None:
    own = mkdir(world.root / "own")
    exe(own / "ssh")
    f = world.lint(world.shim, own)  # no trusted dir on PATH at all
    (sh,) = hits(f, "MCS209")
    assert sh.message == f"ssh resolves to {own}/ssh (not a trusted directory)"


def test_shim_winner_is_trusted_and_aliases_are_not_hidden(world: World) -> None:
    exe(world.shim / "git")
    alias = world.root / "sys-alias"
    alias.symlink_to(world.sysbin)  # like /bin -> /usr/bin on merged-usr systems
    value = f"{world.shim}:{world.sysbin}:{alias}"
    findings, facts = lint_path(value, world.settings, Scope("t"), str(world.root))
    assert hits(findings, "MCS209") == []
    (git,) = [s for s in shadows(facts, ["git"])]
    assert git.path == f"{world.shim}/git"
    assert git.hidden == (f"{world.sysbin}/git",)  # the alias reaches the same file


def test_clean_path_has_no_findings(world: World) -> None:
    assert world.lint(world.shim, world.sysbin) == []


def test_every_finding_carries_command_and_path(world: World) -> None:
    evil = mkdir(world.root / "evil", 0o777)
    exe(evil / "git")
    f = world.lint(":", evil, world.temp, "rel", world.sysbin, world.sysbin)
    assert {x.rule.id for x in f} >= {"MCS201", "MCS202", "MCS204", "MCS205", "MCS208", "MCS209"}
    for x in f:
        for ev in x.evidence:
            assert {"command", "path"} <= set(ev.data)


def test_dotdot_after_a_symlink_resolves_like_the_kernel(world: World) -> None:
    """`link/..` is the parent of the link's target, not the link's own directory."""
    deep = mkdir(world.root / "far" / "away" / "bin")
    exe(deep.parent / "tools" / "git")
    link = world.root / "lnk"
    link.symlink_to(deep)
    f = world.lint(world.shim, f"{link}/../tools", world.sysbin)
    (sh,) = hits(f, "MCS209")
    assert f"hiding {world.sysbin}/git" in sh.message
    assert os.path.realpath(f"{link}/../tools") == str(deep.parent / "tools")
