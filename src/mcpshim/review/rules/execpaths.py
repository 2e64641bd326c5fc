"""Where an executable came from: PATH lookup, temp and writable dirs, drifted targets."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator

from mcpshim.family.tree import Image
from mcpshim.review.findings import Severity, define_rule
from mcpshim.review.rules.registry import Context, Hit, check
from mcpshim.review.shapes import (
    GIT_EXEC_DIRS,
    canonical,
    command_name,
    matches_any,
    same_file,
    under,
)

PATH_RESOLVED = define_rule(
    "MCS101",
    "path-resolved-exec",
    Severity.LOW,
    "A command was found through a PATH lookup. When the lookup reached an mcpshim shim, the "
    "shim ran the target it pinned at install: the safe outcome, reported as info.",
    "Nothing to do when the lookup reached a shim; otherwise call the program by its "
    "absolute path, or pin it with `mcpshim install NAME`.",
    cwe=["CWE-426", "CWE-427"],
    answers=(),
)
TEMP_EXEC = define_rule(
    "MCS102",
    "exec-from-temp-dir",
    Severity.HIGH,
    "An executable or script ran from a temporary directory anyone can write to.",
    "Install the program into a trusted, root-owned directory and call it from there.",
    cwe=["CWE-426", "CWE-379"],
    answers=("new",),
)
WRITABLE_EXEC = define_rule(
    "MCS103",
    "exec-from-writable-dir",
    Severity.HIGH,
    "An executable or script ran from a group- or world-writable directory, or is writable itself.",
    "Remove group/world write permission (chmod go-w) from the file and its directory.",
    cwe=["CWE-732"],
    answers=("new",),
)
TEMP_CWD = define_rule(
    "MCS104",
    "cwd-in-temp-dir",
    Severity.LOW,
    "A process ran with its working directory in a temporary directory.",
    "Run the server's tools in a dedicated workspace, not in /tmp or Downloads.",
    cwe=["CWE-427"],
    answers=(),
)
HASH_CHANGED = define_rule(
    "MCS111",
    "target-changed",
    Severity.HIGH,
    "The program a shim runs no longer matches the hash recorded when it was installed.",
    "Check who replaced the program; if the update is legitimate, run `mcpshim install` again.",
    cwe=["CWE-494"],
    answers=("new",),
)
SHADOWED = define_rule(
    "MCS120",
    "shadowed-command",
    Severity.HIGH,
    "A program named like a pinned command (one a shim pins, or the policy lists targets "
    "for) ran from another path: the name meant a new executable, and its shim never ran.",
    "Find who put it there (a project's node_modules/.bin or a temp dir early on PATH); keep "
    "writable directories off the server's PATH (mcpshim lint-path) or call the pinned "
    "program by its absolute path.",
    cwe=["CWE-426", "CWE-427"],
    confidence="inferred",
    answers=("new",),
)
UNTRUSTED_DIR = define_rule(
    "MCS119",
    "target-outside-trusted-dirs",
    Severity.LOW,
    "An executable ran from a directory that is not on the policy's trusted list.",
    "Add the directory to trusted_dirs in the policy if it is expected, or call a trusted copy.",
    cwe=["CWE-426"],
    answers=("new",),
)

#: per interpreter: the options whose value is the next argument, and those that mean
#: there is no script (inline code, a module): `node --conditions node x.js` runs x.js
_SH_OPTS = (frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}), frozenset({"-c"}))
_PY_OPTS = (frozenset({"-W", "-X", "--check-hash-based-pycs"}), frozenset({"-c", "-m"}))
_NODE_OPTS = (
    frozenset({"-r", "--require", "--import", "--loader", "--experimental-loader", "-C",
               "--conditions", "--input-type", "--inspect-port", "--title", "--env-file",
               "--watch-path", "--disable-warning", "--redirect-warnings", "--openssl-config",
               "--icu-data-dir", "--dns-result-order", "--unhandled-rejections",
               "--stack-size", "--max-old-space-size"}),
    frozenset({"-e", "--eval", "-p", "--print", "-i", "--interactive"}),
)  # fmt: skip
_INTERPRETER_OPTIONS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "node": _NODE_OPTS,
    "python": _PY_OPTS,
    "python3": _PY_OPTS,
    "ruby": (frozenset({"-I", "-r", "-C", "-E", "-F", "--encoding"}), frozenset({"-e"})),
    "perl": (frozenset({"-I", "-M", "-m", "-C", "-x"}), frozenset({"-e", "-E"})),
    **dict.fromkeys(("sh", "bash", "dash", "zsh", "ksh", "mksh"), _SH_OPTS),
}


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _data(img: Image, path: str) -> dict[str, str]:
    return {"command": command_name(img), "path": path}


def _invoked_dir(img: Image) -> str:
    return os.path.dirname(_text(img.argv0))


def _on_path(ctx: Context, d: str, path: bytes) -> bool:
    """Whether directory `d` is an entry of the PATH the process received (by spelling or,
    for an entry that is a symlink or has `..`, by where it leads)."""

    def compute() -> bool:
        entries = [os.fsdecode(e) for e in path.split(b":") if e]
        if d in entries:
            return True
        real = os.path.realpath(d)
        return any(os.path.realpath(e) == real for e in entries if e.startswith("/"))

    result: bool = ctx.cached("on-path", f"{d}\0{os.fsdecode(path)}", compute)
    return result


@check(PATH_RESOLVED)
def path_resolved(ctx: Context, img: Image) -> Iterator[Hit]:
    """A shim's record is its own proof: the shim ran, and it runs the target it pins (the
    record names it). The path the caller exec'd (`invoked_as`) says whether the shim was
    reached through PATH: its directory is an entry of the PATH the record holds. So the
    record alone answers, wherever the shims were installed; and a lookup that reached a
    pinned shim is the safe outcome: info."""
    if img.source != "shim" or not img.argv0.startswith(b"/"):
        return
    d = _invoked_dir(img)
    if not d or not _on_path(ctx, d, img.path):
        return
    name = command_name(img)
    target = _text(img.target)
    yield Hit(
        PATH_RESOLVED,
        f"{name} was found through PATH and reached its shim, which ran the pinned {target}",
        f"{name}\0{target}",
        target,
        {"pin": target, "shim": _text(img.argv0)},
        Severity.INFO,
    )


def script_of(img: Image) -> str | None:
    """The script an interpreter was given (node x.js, sh ./build.sh), as an absolute path:
    the first operand, past the options (and the values of those that take one)."""
    opts = _INTERPRETER_OPTIONS.get(command_name(img))
    if opts is None:
        return None
    takes_value, no_script = opts
    skip = False
    for a in img.args:
        t = _text(a)
        if skip:
            skip = False
            continue
        if t == "--":
            continue
        if t.startswith(("-", "+")) and len(t) > 1:
            name = t.split("=", 1)[0]
            if name in no_script or (
                not t.startswith("--")
                and t[1:].isalpha()
                and "c" in t[1:]
                and no_script is _SH_OPTS[1]
            ):
                return None
            skip = name in takes_value and "=" not in t
            continue
        return os.path.normpath(os.path.join(_text(img.cwd), t)) if t else None
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


def _pins(ctx: Context, name: str) -> tuple[str, ...]:
    pins = ctx.pinned(name)
    cp = ctx.policy.command(name)
    if cp is not None:
        pins += cp.targets
    return tuple(pins)


def _trusted(ctx: Context, path: str) -> bool:
    return any(
        under(os.path.dirname(q), t)
        for q in (path, os.path.realpath(path))
        for t in (*ctx.policy.trusted_dirs, *GIT_EXEC_DIRS)
    )


@check(SHADOWED)
def shadowed(ctx: Context, img: Image) -> Iterator[Hit]:
    """`git` that is not the pinned git: an executable (a traced or sampled exec) or a
    script an interpreter ran (`node .../node_modules/.bin/git`, what a shim sees when a
    `#!/usr/bin/env node` program named git runs) under a pinned command's name."""
    paths: list[str] = []
    target = _text(img.target)
    if img.source != "shim" and target.startswith("/"):
        paths.append(target)
    script = script_of(img)
    if script:
        paths.append(os.path.normpath(script))
    for p in paths:
        name = os.path.basename(p)
        pins = _pins(ctx, name)
        if not pins or matches_any(p, pins):
            continue
        if any(under(os.path.dirname(p), d) for d in GIT_EXEC_DIRS):
            continue  # git's own helpers, run by git
        trusted = _trusted(ctx, p)
        where = "a trusted directory" if trusted else "outside the trusted directories"
        yield Hit(
            SHADOWED,
            f"{name} meant {p} ({where}), not the pinned {canonical(pins[0])}",
            f"{name}\0{p}",
            p,
            {**_data(img, p), "pinned": list(pins)},
            Severity.MEDIUM if trusted else None,
        )


@check(TEMP_EXEC, WRITABLE_EXEC, UNTRUSTED_DIR)
def exec_location(ctx: Context, img: Image) -> Iterator[Hit]:
    target = _text(img.target)
    cwd = _text(img.cwd) if not img.cwd_unknown else ""
    if target and not target.startswith("/") and cwd.startswith("/"):
        target = os.path.normpath(os.path.join(cwd, target))  # `.git/hooks/pre-commit`
    paths = [("executable", target)] if target.startswith("/") else []
    script = script_of(img)
    if script:
        paths.append(("script", os.path.normpath(script)))
    name = command_name(img)
    for what, p in paths:
        temp = _temp_root(ctx, p)
        if temp is not None and not ctx.policy.ignored(TEMP_EXEC.id, p):
            yield Hit(
                TEMP_EXEC, f"{what} {p} is in temporary directory {temp}", p, p, _data(img, p)
            )
            continue
        why = _writable_reason(ctx, p)
        if why is not None and not ctx.policy.ignored(WRITABLE_EXEC.id, p):
            yield Hit(WRITABLE_EXEC, f"{what} {p}: {why}", p, p, _data(img, p))
            continue
        if what == "executable" and not _trusted(ctx, p):
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
        # One finding per directory (review files it once per session, not per call).
        yield Hit(
            TEMP_CWD,
            f"processes ran in {cwd}, inside temporary directory {temp}",
            cwd,
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
    manifest = ctx.manifest_for(img) if img.source == "shim" else None
    if manifest is None:
        return
    entry = manifest.shims.get(img.command)
    if entry is None:
        return
    target = _text(img.target)
    if not same_file(target, entry.target):
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
