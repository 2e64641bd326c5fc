"""Which programs a tool call's name, description or arguments explain (MCS502's question).

A tool's name is a hint: `git_status` explains git, a test tool the test runners, a tool
that says it runs commands anything. The call's arguments are a declaration of their own
(`{"command": "bash"}`, `"cd d && git log"`). A shell line's programs are the line's, and
a package's wrapper script's are the wrapper's: the line (MCS105, MCS401) or the wrapper is
what the tool ran.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from mcpshim.family.evidence import arg_values
from mcpshim.family.tree import Image, Node
from mcpshim.review.rules.execpaths import script_of
from mcpshim.review.shapes import shell_line, under

__all__ = ["explained", "family_of", "in_a_line", "named_by_arguments", "runs_any_command"]


_SPLIT = re.compile(r"[^a-z0-9]+")
#: what a test runner runs: the runner, the interpreter of the project's tests, the package
#: runner or build tool that starts them (not curl, not cp: what tests start is the tests')
_TEST_RUNNERS = ("pytest", "py.test", "python", "python3", "node", "nodejs", "npm", "npx",
                 "yarn", "pnpm", "sh", "bash", "dash", "vitest", "jest", "mocha", "tox",
                 "nox", "make", "cargo", "go", "deno", "bun", "uv", "uvx", "poetry", "hatch",
                 "ruby", "rake", "bundle", "mvn", "gradle", "dotnet", "phpunit")  # fmt: skip
# Words in tool names that name a family of executables rather than one.
_ALIASES = {
    "shell": ("sh", "bash", "dash", "zsh"),
    "python": ("python", "python3"),
    "node": ("node", "nodejs"),
    "search": ("grep", "rg", "find", "ag", "ack"),
    # a browser tool runs the browser: its binary, its helpers (crashpad), a headless build
    "browser": (
        "chromium",
        "chrome",
        "google-chrome",
        "chromium-browser",
        "headless_shell",
        "chrome_crashpad_handler",
        "firefox",
        "msedge",
        "webkit",
    ),
    "grep": ("grep", "rg"),
    "test": _TEST_RUNNERS,
    "tests": _TEST_RUNNERS,
    "pytest": _TEST_RUNNERS,
}


def _words(name: str) -> set[str]:
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    return {w for w in _SPLIT.split(name) if w}


#: a tool that says it runs whatever command it is given (`run_command`, `shell_execute`,
#: "Execute a shell command"): every program it starts is what it said it does
_RUNS_ANY = re.compile(
    r"\b(run|runs|running|execute|executes|executing|exec)\b\W+(?:\w+\W+){0,2}?"
    r"(command|commands|cmd|shell|terminal|program|programs|script|scripts)\b",
    re.IGNORECASE,
)
_CODE = re.compile(r"`[^`]*`")  # a description's code spans name things, they say nothing
#: two of these in a tool's name: it runs what it is given
_RUNNER_WORDS = frozenset({"shell", "terminal", "bash", "cmd", "command", "commands", "exec",
                           "execute", "run"})  # fmt: skip


def runs_any_command(tool: str, description: str = "") -> bool:
    """The tool's name or description says it runs arbitrary commands (a test runner runs
    tests: the runners of `_TEST_RUNNERS`, not whatever the tests start)."""
    words = _words(tool)
    if len(words & _RUNNER_WORDS) >= 2 or words & {"shell", "terminal", "bash"}:
        return True
    said = _CODE.sub(" ", description)
    return bool(_RUNS_ANY.search(tool.replace("_", " ")) or _RUNS_ANY.search(said))


def family_of(command: str, target: bytes = b"") -> str:
    """A program's family: git's helpers (git-remote-https, git-upload-pack) and the hooks
    git runs (a project's code: MCS107 says so) are git."""
    if command.startswith("git-") or (b"/hooks/" in target and b".git/" in target):
        return "git"
    return command


_PUNCT = re.compile(r"^[^\w./-]+|[^\w./-]+$")  # quotes, commas, brackets around a word
_SEGMENTS = re.compile(r"[;&|()\n`]+|\$\(")  # where a shell line starts another command


def named_by_arguments(command: str, arguments: Any) -> bool:
    """The call's arguments name the program: `{"command": "bash"}`, an argv list's first
    item `["git", "status"]`, a command of a line `"cd d && git log -3"`, a path
    `/usr/bin/bash`."""
    for _where, v in arg_values(arguments):
        heads = {v, os.path.basename(v)}
        for seg in _SEGMENTS.split(v):
            words = seg.split()
            if words:
                # a program quoted inside code: execFileSync('curl', [...]), run(["git", ...])
                head = _PUNCT.sub("", words[0])
                heads |= {head, os.path.basename(head)}
        if command in heads:
            return True
    return False


def explained(
    tool: str,
    command: str,
    tools: Mapping[str, tuple[str, ...]],
    description: str = "",
    arguments: Any = None,
) -> bool:
    """The policy's [tools] entry decides; without one, the tool's name must say it (or its
    name and description say it runs any command), or its arguments name the program."""
    if tool in tools:
        return command in tools[tool] or family_of(command) in tools[tool]
    command = family_of(command)
    if runs_any_command(tool, description) or named_by_arguments(command, arguments):
        return True
    name = re.sub(r"[0-9.]+$", "", command.lower()) or command.lower()
    words = _words(tool)
    return bool({command.lower(), name} & words) or any(name in _ALIASES.get(w, ()) for w in words)


def in_a_line(node: Node, trusted: tuple[str, ...]) -> bool:
    """The process runs a program of its parent shell's -c line, or of a script a package
    installed in a trusted directory (Debian's /usr/bin/chromium wrapper: its uname, expr,
    find): the line, or the wrapper, is what the tool ran."""
    p = node.parent
    if p is None or not p.known or not p.images:
        return False
    while (
        p.parent is not None and p.parent.known and all(i.source == "trace-fork" for i in p.images)
    ):  # a subshell, `$(...)`: the script it is a fork of runs it
        p = p.parent
    forked_from = _image_at(p, node.first_time)  # the wrapper may exec its program later
    if shell_line(forked_from) is not None:
        return True
    target = forked_from.target.decode("utf-8", "surrogateescape")
    script = script_of(forked_from) or (target if _has_shebang(target) else None)
    return script is not None and any(
        under(os.path.dirname(q), t) for q in (script, os.path.realpath(script)) for t in trusted
    )


def _image_at(node: Node, t: datetime | None) -> Image:
    """What a process was running at `t` (when it forked a child): its last exec by then."""
    found = node.images[0]
    for img in node.images:
        if img.entry and (t is None or img.time is None or img.time <= t):
            found = img
    return found


@functools.lru_cache(maxsize=1024)
def _has_shebang(path: str) -> bool:
    """A script the kernel runs through its `#!` interpreter (a wrapper), not a binary."""
    if not path.startswith("/") or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == b"#!"
    except OSError:
        return False
