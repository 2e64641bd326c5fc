"""The evidence that picks one of several overlapping calls (family.evidence): what a
process's own record may name of a call's arguments, and what it may not."""

from __future__ import annotations

from typing import Any

import pytest

from mcpshim.family.evidence import ArgIndex, Candidates
from mcpshim.family.tree import Image, Node

BASE = "/srv/work"  # the server's working directory


def _img(args: list[str], cwd: str = BASE, command: str = "git", **kw: Any) -> Image:
    return Image("shim", "exec.log@1", None, "b", 10, 1, 5, None, cwd.encode(), command,
                 f"/usr/bin/{command}".encode(), f"/shims/{command}".encode(),
                 tuple(a.encode() for a in args), "S", **kw)  # fmt: skip


def _node(*imgs: Image, pid: int = 10) -> Node:
    return Node(pid, "b", pid, 5, True, list(imgs))


@pytest.mark.parametrize(
    ("arguments", "args", "cwd", "why"),
    [
        ({"repo_path": "D/d3"}, ["-C", "D/d3", "rev-parse"], BASE,
         "its arguments name this call's repo_path"),
        # a relative argument and an absolute argv: one path, from the server's directory
        ({"repo_path": "D/d3"}, ["-C", f"{BASE}/D/d3", "status"], BASE,
         "its arguments name this call's repo_path"),
        ({"repo_path": "D/d3"}, ["log", f"{BASE}/D/d3/README"], BASE,
         "its arguments name a path under this call's repo_path"),
        ({"package_dir": "/p/pkg"}, ["test"], "/p/pkg", "its working directory is this "
         "call's package_dir"),
        ({"package_dir": "/p/pkg"}, ["test"], "/p/pkg/sub", "its working directory is under "
         "this call's package_dir"),
        ({"opts": {"files": ["a.txt", "b.txt"]}}, ["add", "b.txt"], BASE,
         "its arguments name this call's opts.files[1]"),
        ({"command": "git status --short"}, ["status", "--short"], BASE,
         "its command line is this call's command"),
        ({"program": "git"}, ["--version"], BASE, "its program is this call's program"),
    ],
)  # fmt: skip
def test_what_a_record_may_name(arguments: Any, args: list[str], cwd: str, why: str) -> None:
    assert ArgIndex.of(arguments, BASE).names(_img(args, cwd), BASE) == why


@pytest.mark.parametrize(
    ("arguments", "args", "cwd"),
    [
        ({"path": "."}, ["-C", ".", "status"], BASE),  # the server's own directory
        ({"path": BASE}, ["-C", BASE, "status"], BASE),
        ({"path": "/srv"}, ["-C", "/srv/work/x"], BASE),  # above it: every process is there
        ({"path": "/"}, ["ls", "/etc"], BASE),
        ({"n": 20, "all": True}, ["log", "-n", "20", "True"], BASE),  # no number or boolean
        ({"q": "x"}, ["grep", "x"], BASE),  # one character
        # what the recorder redacted names nothing, whichever writer redacted it
        ({"token": "[REDACTED:credential-name]"}, ["[REDACTED:credential-name]"], BASE),
        ({"repo_path": "D/d3"}, ["-C", "D/d30", "status"], BASE),  # d30 is not under d3
        ({"repo_path": "D/d3"}, ["status"], BASE),  # the server's cwd is no evidence
    ],
)  # fmt: skip
def test_what_names_no_call(arguments: Any, args: list[str], cwd: str) -> None:
    assert ArgIndex.of(arguments, BASE).names(_img(args, cwd), BASE) is None


def test_one_named_call_is_chosen_several_narrow_none_leaves_all() -> None:
    cands = Candidates(
        [{"repo_path": "D/d0"}, {"repo_path": "D/d1"}, {"repo_path": "D/d1"}, {}], BASE
    )
    one = cands.choose((0, 1, 2, 3), [_node(_img(["-C", "D/d0", "rev-parse"]))])
    assert one.one == (0, "its arguments name this call's repo_path")
    two = cands.choose((0, 1, 2, 3), [_node(_img(["-C", "D/d1", "rev-parse"]))])
    assert two.one is None and sorted(two.named) == [1, 2]
    none = cands.choose((0, 1, 2, 3), [_node(_img(["--version"]))])
    assert none.named == {}
    # only the candidates count: a call not in flight is never chosen
    assert cands.choose((1, 2, 3), [_node(_img(["-C", "D/d0"]))]).named == {}


def test_a_descendant_speaks_for_the_process_that_started_it() -> None:
    """`sh -c` with no argument of the call's, its git naming the call's path: the sh (and
    so the git) is that call's, and the reason says which process named it."""
    cands = Candidates([{"repo": "/r/a"}, {"repo": "/r/b"}], BASE)
    sh = _node(_img(["-c", 'cd "$1" && git status'], command="sh"), pid=10)
    git = _node(_img(["status"], cwd="/r/b"), pid=11)
    got = cands.choose((0, 1), [sh, git])
    assert got.one == (
        1,
        "a process it started, pid 11 (git): its working directory is this call's repo",
    )
