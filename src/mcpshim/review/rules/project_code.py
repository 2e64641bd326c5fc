"""Code the project defines, run by a tool other than a package runner (MCS107, with
runners.py): a git hook, the conftest.py and test modules pytest imports, a tox, nox or
pre-commit configuration. Whoever edits the checkout chooses what runs; the finding names
each file and its SHA-256, so a reviewer (and a lock) can say which version was approved.

Read from what the records show: the hook is the program that ran (its path is under a
repository's hooks directory, or git ran a script of the checkout); the test runner's
project files are found in its working directory, the way the runner finds them
(conftest.py and test_*.py / *_test.py below it, tox.ini, noxfile.py,
.pre-commit-config.yaml). What a runner then imported exactly is file evidence (issue 40).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator

from mcpshim.family.tree import Image
from mcpshim.review.rules.execpaths import script_of
from mcpshim.review.rules.registry import Context, Hit, check
from mcpshim.review.rules.runners import PROJECT_SCRIPTS
from mcpshim.review.shapes import command_name

__all__ = ["project_files", "sha256_of"]

_PYTEST = frozenset({"pytest", "py.test"})
_CONFIGS = {"tox": ("tox.ini",), "nox": ("noxfile.py",), "pre-commit": (".pre-commit-config.yaml",)}
_HOOK = re.compile(r"(?:^|/)\.git/hooks/")  # relative when the record knows no cwd
_DEPTH = 3  # directories below the runner's working directory it looks in
_MOST = 200  # entries it reads, at most
_NAMED = 5  # files a finding names
_SKIP = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".nox"})


def sha256_of(path: str) -> str:
    """A file's SHA-256 (hex), '' when it cannot be read (gone, not a regular file)."""
    h = hashlib.sha256()
    if not os.path.isabs(path):
        return ""  # a parent shell's record knows no cwd: which file is not known here
    try:
        if not os.path.isfile(path):  # a FIFO would block the read
            return ""
        with open(path, "rb", buffering=0) as fh:
            while chunk := fh.read(1 << 16):
                h.update(chunk)
    except OSError:
        return ""
    return h.hexdigest()


def _pytest_files(cwd: str) -> list[str]:
    """conftest.py first, then the test modules pytest would collect, below cwd."""
    conf: list[str] = []
    tests: list[str] = []
    seen = 0
    for root, dirs, files in os.walk(cwd):
        depth = root[len(cwd) :].count(os.sep)
        dirs[:] = sorted(d for d in dirs if d not in _SKIP and depth < _DEPTH)
        for f in sorted(files):
            seen += 1
            path = os.path.join(root, f)
            if f == "conftest.py":
                conf.append(path)
            elif f.endswith(".py") and (f.startswith("test_") or f.endswith("_test.py")):
                tests.append(path)
        if seen > _MOST:
            break
    return conf + tests


def project_files(img: Image) -> tuple[str, list[str]]:
    """What project-defined code this exec runs, and the files that hold it (empty: none)."""
    name = command_name(img)
    cwd = img.cwd.decode("utf-8", "surrogateescape")
    args = [a.decode("utf-8", "surrogateescape") for a in img.args]
    # the hook as the program (the trace, a shim), or as the script its `#!` interpreter
    # was given (a sample, a shim's record of its parent shell)
    for run in (img.target.decode("utf-8", "surrogateescape"), script_of(img) or ""):
        target = os.path.join(cwd, run) if run else ""
        if _HOOK.search(target) or ("/hooks/" in target and "/.git/" in target):
            return "a git hook of the checkout", [os.path.normpath(target)]
    if not cwd or img.cwd_unknown:
        return "", []
    if name in _PYTEST or (name.startswith("python") and args[:2] == ["-m", "pytest"]):
        files = _pytest_files(cwd)
        return ("pytest imports the project's conftest.py and test modules", files) if files else (
            "", [])  # fmt: skip
    for tool, names in _CONFIGS.items():
        if name == tool or (name.startswith("python") and args[:2] == ["-m", tool]):
            found = [os.path.join(cwd, n) for n in names if os.path.isfile(os.path.join(cwd, n))]
            return (f"{tool} runs what the project's {names[0]} says", found) if found else (
                "", [])  # fmt: skip
    return "", []


@check(PROJECT_SCRIPTS, parents=True)
def project_code(ctx: Context, img: Image) -> Iterator[Hit]:
    if not img.entry:
        return
    what, files = project_files(img)
    if not files:
        return
    cwd = img.cwd.decode("utf-8", "surrogateescape")
    hashes = {f: ctx.cached("sha256", f, lambda f=f: sha256_of(f)) for f in files}  # type: ignore[misc]
    named = [f"{f} (sha256 {hashes[f][:12]})" if hashes[f] else f for f in files[:_NAMED]]
    more = f" and {len(files) - _NAMED} more" if len(files) > _NAMED else ""
    data = {"command": command_name(img), "path": files[0], "cwd": cwd,
            "files": [{"path": f, "sha256": hashes[f]} for f in files[:_NAMED]]}  # fmt: skip
    yield Hit(PROJECT_SCRIPTS, f"{what}: {', '.join(named)}{more}",
              f"{command_name(img)}\0{files[0]}", files[0], data)  # fmt: skip
