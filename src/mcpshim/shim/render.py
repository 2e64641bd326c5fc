"""Shim scripts as text: the templates in the top-level `shims/`, with this install's values
put in. Pure: nothing here touches the filesystem except reading the templates.

Like pre-commit's hook files, every shim carries a marker line; mcpshim only ever overwrites
or deletes a file that carries it.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from mcpshim.errors import UsageError
from mcpshim.log import redact_sh
from mcpshim.shim.manifest import OnFailure

__all__ = ["LIB", "MARKER", "check_name", "render_lib", "render_shim"]

MARKER = "# mcpshim-shim v1"
_NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-")


LIB = ".mcpshim-lib.sh"


def _template(name: str) -> str:
    try:
        return (resources.files("mcpshim") / "shims" / name).read_text()
    except (FileNotFoundError, NotADirectoryError):
        # Running from a source checkout (editable install): the templates sit at the top.
        return (Path(__file__).resolve().parents[3] / "shims" / name).read_text()


def check_name(name: str) -> str:
    if not name or name.startswith((".", "-")) or not set(name) <= _NAME_OK:
        raise UsageError(f"not a command name: {name!r}")
    return name


def render_lib() -> str:
    """The library the shims source on a rare path (secrets, spill files, shell parents)."""
    text = _template("lib.sh")
    for key, value in redact_sh.lib_sections().items():
        text = text.replace(key, value)
    return text


def _substitute(text: str, subs: dict[str, str]) -> str:
    """Every marker replaced in one pass: a value is never scanned again, so a value that
    holds marker text (a log dir named `x@@ONFAIL@@`) stays what it is."""
    pattern = re.compile("|".join(re.escape(k) for k in subs))
    return pattern.sub(lambda m: subs[m.group(0)], text)


def render_shim(
    name: str,
    target: str,
    log_dir: str,
    on_failure: OnFailure = "run",
    interpreter: str = "/bin/sh",
    lib: str | None = None,
    shells: Iterable[str] = ("/bin/sh",),
    bash: bool = False,
) -> str:
    """The shim's text. Every value enters the script through shlex.quote only, once.

    `bash`: the interpreter is bash, which then runs the shim with -p (privileged mode:
    no functions, BASH_ENV, SHELLOPTS, BASHOPTS, CDPATH or GLOBIGNORE from the environment).
    """
    check_name(name)
    lib_path = lib or os.path.join(os.path.dirname(log_dir), LIB)
    for label, value in (
        ("target", target),
        ("log dir", log_dir),
        ("interpreter", interpreter),
        ("library", lib_path),
    ):
        if not os.path.isabs(value) or "\n" in value or "\0" in value:
            raise UsageError(f"{label} must be an absolute path: {value!r}")
    if " " in interpreter or "\t" in interpreter:
        raise UsageError(f"interpreter path cannot hold blanks (shebang): {interpreter!r}")
    if on_failure not in ("run", "refuse"):
        raise UsageError(f"--on-log-failure must be run or refuse, not {on_failure!r}")
    subs = {
        "@@INTERP@@": interpreter + (" -p" if bash else ""),
        "@@LOGDIR@@": shlex.quote(log_dir),
        "@@TARGET@@": shlex.quote(target),
        "@@NAME@@": shlex.quote(name),
        "@@ONFAIL@@": shlex.quote(on_failure),
        "@@LIB@@": shlex.quote(lib_path),
        "@@TRIGGERS@@": redact_sh.sh_triggers(name, os.path.basename(target)),
        "@@SHELLS@@": " ".join(shlex.quote(p) for p in dict.fromkeys(["/bin/sh", *shells])),
        # (a bash shim run by dash, /bin/sh changed since install, asks the environment)
        "@@BASH@@": "${BASH_VERSION:+1}" if bash else "''",
    }
    return _strip_comments(_substitute(_only_for(_template("shim.sh"), bash), subs))


_BASH_PART = re.compile(r"^#bash\{.*?^#bash\}$\n?", re.M | re.S)


def _only_for(text: str, bash: bool) -> str:
    """The template with its bash-only part (between `#bash{` and `#bash}`) kept for a bash
    interpreter alone: dash never reads, let alone runs, a line of it."""
    return text if bash else _BASH_PART.sub("", text)


def _strip_comments(text: str) -> str:
    """The shim without its comment lines and blank lines: sh reads every line of a shim on
    every exec, and the commented text is in the package (`shims/shim.sh`). The first two
    lines (interpreter, marker) and shellcheck directives stay."""
    head, rest = text.split("\n", 2)[:2], text.split("\n", 2)[2]
    kept = [
        line
        for line in rest.split("\n")
        if line.strip() and not (line.lstrip().startswith("#") and "shellcheck" not in line)
    ]
    note = "# (comments are in the commented source: shims/shim.sh in the mcpshim package)"
    return "\n".join([*head, note, *kept]) + "\n"
