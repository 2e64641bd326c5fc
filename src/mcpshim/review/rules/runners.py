"""Package runners that execute project-defined scripts (npm run, npx, make...)."""

from __future__ import annotations

import os
from collections.abc import Iterator

from mcpshim.family.tree import Image
from mcpshim.review.findings import Severity, define_rule
from mcpshim.review.rules.registry import Context, Hit, check
from mcpshim.review.shapes import command_name, subcommand

PROJECT_SCRIPTS = define_rule(
    "MCS107",
    "project-code-ran",
    Severity.MEDIUM,
    "The server ran code the project defines, in a checkout it can write: a package "
    "runner's scripts (package.json, Makefile), a git hook, the conftest.py and test "
    "modules pytest imports, a tox, nox or pre-commit configuration. Whoever edits the "
    "checkout chooses what runs; the finding names each file and its SHA-256.",
    "Review the files before running them (the hashes say which version you saw); use `npm "
    "ci --ignore-scripts` for installs, and run project code only from a read-only or "
    "reviewed checkout.",
    cwe=["CWE-829"],
    confidence="inferred",
    answers=("editable",),
)

# npm subcommands that run a named script even under --ignore-scripts (npm docs)
_NPM_RUN = frozenset({"run", "run-script", "rum", "urn", "test", "t", "tst", "start", "stop"})
_NPM_RUN |= {"restart", "exec", "x", "explore"}
# npm subcommands that run lifecycle scripts unless --ignore-scripts
_NPM_INSTALL = frozenset(
    {"install", "i", "in", "ins", "inst", "isntall", "add", "ci", "clean-install"}
)
_NPM_INSTALL |= {"rebuild", "rb", "install-test", "it", "install-ci-test", "cit", "pack", "publish"}
_NPM_INSTALL |= {"link", "ln", "update", "up", "upgrade"}
_PROJECT_FILES = {
    "npm": ("package.json",),
    "npx": ("package.json",),
    "yarn": ("package.json",),
    "pnpm": ("package.json",),
    "make": ("GNUmakefile", "makefile", "Makefile"),
}
_HARMLESS = frozenset({"--version", "-v", "-V", "--help", "-h", "help", "version"})


def _runs_scripts(img: Image, name: str) -> str | None:
    """Why this invocation runs project-defined code, or None."""
    args = [a.decode("utf-8", "surrogateescape") for a in img.args]
    if any(a in _HARMLESS for a in args[:1]):
        return None
    if name == "npm":
        sub = subcommand(img)
        ignore = any(a in {"--ignore-scripts", "--ignore-scripts=true"} for a in args)
        if sub in _NPM_RUN:
            return f"npm {sub} runs a script from package.json"
        if sub in _NPM_INSTALL and not ignore:
            return f"npm {sub} runs lifecycle scripts (no --ignore-scripts)"
        return None
    if name == "npx":
        return "npx runs a package's executable (the project's own, or one it fetches)"
    if name in ("yarn", "pnpm"):
        if "--ignore-scripts" in args and subcommand(img) in ("", "install", "add", "i"):
            return None
        return f"{name} {subcommand(img) or 'install'} runs project scripts"
    if name == "make":
        return "make runs the recipes of the project's makefile"
    return None


def _checkout(cwd: str, name: str) -> tuple[bool, str]:
    """(counts as a writable checkout, detail). A cwd that is gone cannot be cleared."""
    if not os.path.isdir(cwd):
        return True, f"{cwd} (no longer exists, cannot check)"
    found = next((f for f in _PROJECT_FILES[name] if os.path.isfile(os.path.join(cwd, f))), None)
    if found is None:
        return False, ""
    if not os.access(cwd, os.W_OK):
        return False, ""
    return True, f"{os.path.join(cwd, found)} in writable {cwd}"


@check(PROJECT_SCRIPTS)
def package_runner(ctx: Context, img: Image) -> Iterator[Hit]:
    name = command_name(img)
    if name not in _PROJECT_FILES:
        return
    why = _runs_scripts(img, name)
    if why is None:
        return
    cwd = img.cwd.decode("utf-8", "surrogateescape")
    writable, detail = ctx.cached("checkout", f"{name}\0{cwd}", lambda: _checkout(cwd, name))
    if not writable:
        return
    yield Hit(
        PROJECT_SCRIPTS,
        f"{why}: {detail}",
        f"{name}\0{subcommand(img)}\0{cwd}",
        cwd,
        {"command": name, "path": cwd, "cwd": cwd},
    )
