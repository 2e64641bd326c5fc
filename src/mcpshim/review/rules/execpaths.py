"""Where an executable came from: PATH lookup, temp and writable dirs, drifted targets."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator

from mcpshim.family.tree import Image
from mcpshim.review.findings import Severity, define_rule
from mcpshim.review.rules.registry import Context, Hit, check
from mcpshim.review.shapes import command_name, under

PATH_RESOLVED = define_rule(
    "MCS101",
    "path-resolved-exec",
    Severity.LOW,
    "A command was found through a PATH lookup, so whoever controls PATH chose the program.",
    "Call the program by its absolute path (the finding names the target the lookup reached), "
    "or pin that target under [commands.NAME].targets in the policy.",
    cwe=["CWE-426", "CWE-427"],
)
TEMP_EXEC = define_rule(
    "MCS102",
    "exec-from-temp-dir",
    Severity.HIGH,
    "An executable or script ran from a temporary directory anyone can write to.",
    "Install the program into a trusted, root-owned directory and call it from there.",
    cwe=["CWE-426", "CWE-379"],
)
WRITABLE_EXEC = define_rule(
    "MCS103",
    "exec-from-writable-dir",
    Severity.HIGH,
    "An executable or script ran from a group- or world-writable directory, or is writable itself.",
    "Remove group/world write permission (chmod go-w) from the file and its directory.",
    cwe=["CWE-732"],
)
TEMP_CWD = define_rule(
    "MCS104",
    "cwd-in-temp-dir",
    Severity.LOW,
    "A process ran with its working directory in a temporary directory.",
    "Run the server's tools in a dedicated workspace, not in /tmp or Downloads.",
    cwe=["CWE-427"],
)
HASH_CHANGED = define_rule(
    "MCS111",
    "target-changed",
    Severity.HIGH,
    "The program a shim runs no longer matches the hash recorded when it was installed.",
    "Check who replaced the program; if the update is legitimate, run `mcpshim install` again.",
    cwe=["CWE-494"],
)
UNTRUSTED_DIR = define_rule(
    "MCS119",
    "target-outside-trusted-dirs",
    Severity.LOW,
    "An executable ran from a directory that is not on the policy's trusted list.",
    "Add the directory to trusted_dirs in the policy if it is expected, or call a trusted copy.",
    cwe=["CWE-426"],
)

_INTERPRETERS = frozenset(
    {"node", "python", "python3", "perl", "ruby", "sh", "bash", "dash", "zsh"}
)


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _data(img: Image, path: str) -> dict[str, str]:
    return {"command": command_name(img), "path": path}


def _invoked_dir(img: Image) -> str:
    return os.path.dirname(_text(img.argv0))


@check(PATH_RESOLVED)
def path_resolved(ctx: Context, img: Image) -> Iterator[Hit]:
    if img.source != "shim" or not img.argv0:
        return
    d = _invoked_dir(img)
    if d and os.path.realpath(d) not in ctx.shim_dirs and d not in ctx.shim_dirs:
        return
    name = command_name(img)
    target = _text(img.target)
    cp = ctx.policy.command(name)
    if cp is not None and cp.targets and _matches(target, cp.targets):
        level: Severity | None = Severity.INFO
    elif name in ctx.policy.sensitive_commands:
        level = Severity.MEDIUM
    else:
        level = None
    yield Hit(
        PATH_RESOLVED,
        f"{name} was found through PATH (reached {target}); pin {target}",
        f"{name}\0{target}",
        target,
        {"pin": target},
        level,
    )


def _matches(path: str, globs: tuple[str, ...]) -> bool:
    import fnmatch

    return any(fnmatch.fnmatchcase(path, g) for g in globs)


def _script(img: Image) -> str | None:
    """The script an interpreter was given (node x.js, sh ./build.sh), as an absolute path."""
    if command_name(img) not in _INTERPRETERS:
        return None
    for a in img.args:
        t = _text(a)
        if t.startswith("-"):
            if t in ("-c", "-e", "-p", "--eval", "--print") or (t[1:].isalpha() and "c" in t):
                return None
            continue
        return os.path.join(_text(img.cwd), t) if t else None
    return None


def _temp_root(ctx: Context, path: str) -> str | None:
    def compute() -> str | None:
        for p in dict.fromkeys([path, os.path.realpath(path)]):
            for t in ctx.policy.temp_dirs:
                if under(p, t):
                    return t
        return None

    result: str | None = ctx.cached("temp", path, compute)
    return result


def _writable_reason(ctx: Context, path: str) -> str | None:
    def compute() -> str | None:
        real = os.path.realpath(path)
        try:
            for d in dict.fromkeys([os.path.dirname(path), os.path.dirname(real)]):
                if os.stat(d).st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                    return f"{d} is group- or world-writable"
            if os.stat(real).st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return f"{real} itself is group- or world-writable"
        except OSError:
            return None
        return None

    result: str | None = ctx.cached("writable", path, compute)
    return result


@check(TEMP_EXEC, WRITABLE_EXEC, UNTRUSTED_DIR)
def exec_location(ctx: Context, img: Image) -> Iterator[Hit]:
    target = _text(img.target)
    paths = [("executable", target)] if target.startswith("/") else []
    script = _script(img)
    if script:
        paths.append(("script", os.path.normpath(script)))
    name = command_name(img)
    for what, p in paths:
        temp = _temp_root(ctx, p)
        if temp is not None:
            yield Hit(
                TEMP_EXEC, f"{what} {p} is in temporary directory {temp}", p, p, _data(img, p)
            )
            continue
        why = _writable_reason(ctx, p)
        if why is not None:
            yield Hit(WRITABLE_EXEC, f"{what} {p}: {why}", p, p, _data(img, p))
            continue
        if what == "executable" and not any(
            under(os.path.dirname(q), t)
            for q in (p, os.path.realpath(p))
            for t in ctx.policy.trusted_dirs
        ):
            yield Hit(
                UNTRUSTED_DIR,
                f"{name} ran {p}, outside the trusted directories",
                p,
                p,
                _data(img, p),
            )


@check(TEMP_CWD)
def cwd_in_temp(ctx: Context, img: Image) -> Iterator[Hit]:
    cwd = _text(img.cwd)
    if not cwd:
        return
    temp = _temp_root(ctx, cwd)
    if temp is not None:
        yield Hit(
            TEMP_CWD,
            f"{command_name(img)} ran in {cwd}, inside temporary directory {temp}",
            f"{command_name(img)}\0{cwd}",
            cwd,
            {**_data(img, cwd), "cwd": cwd},
        )


def _sha256(path: str) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


@check(HASH_CHANGED)
def target_changed(ctx: Context, img: Image) -> Iterator[Hit]:
    if img.source != "shim" or ctx.manifest is None:
        return
    entry = ctx.manifest.shims.get(img.command)
    if entry is None:
        return
    target = _text(img.target)
    if target != entry.target:
        problem = f"the record ran {target} but the manifest pins {entry.target}"
    else:
        digest = ctx.cached("sha256", target, lambda: _sha256(target))
        if digest == entry.sha256:
            return
        problem = (
            f"{target} is missing or unreadable"
            if digest is None
            else f"{target} now hashes to {digest[:16]}…, manifest has {entry.sha256[:16]}…"
        )
    yield Hit(
        HASH_CHANGED,
        f"{img.command}: {problem}",
        f"{img.command}\0{target}",
        target,
        _data(img, target),
    )
