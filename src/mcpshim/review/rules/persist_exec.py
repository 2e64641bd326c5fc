"""Places that run later, made by a command's arguments (MCS414, as the tracer's writes are):
`git config core.hooksPath DIR` (every later commit in the repository runs DIR's hooks),
`git config alias.NAME '!cmd'` (a git subcommand that runs a shell line), and `crontab FILE`
or `crontab -` (a crontab installed). git's own writes to its configuration are judged
here, by what they set, not as writes (log.filetable's `not_by`): `git init` writes
.git/config too. Seen by a shim or by the tracer, so an untraced session says it as well.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from mcpshim.family.tree import Image
from mcpshim.review.rules.file_rules import PERSISTENCE_WRITE
from mcpshim.review.rules.registry import Context, Hit, check
from mcpshim.review.shapes import command_name

__all__ = ["configured_to_run"]

#: git's options before its subcommand that take a value in the next argument
_GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"})
#: `git config` options that take a value
_CONFIG_VALUED = frozenset({"-f", "--file", "--blob", "--type", "--default", "--comment"})
_CONFIG_ONLY = frozenset(
    {
        "--get",
        "--get-all",
        "--get-regexp",
        "--list",
        "-l",
        "--unset",
        "--unset-all",
        "--remove-section",
        "--rename-section",
        "-e",
        "--edit",
        "--get-urlmatch",
        "--get-color",
        "--get-colorbool",
    }
)


def _texts(img: Image) -> list[str]:
    return [a.decode("utf-8", "surrogateescape") for a in img.args]


def _git_config(args: Sequence[str]) -> tuple[str, str] | None:
    """(key, value) a `git [opts] config [opts] KEY VALUE` (or `config set KEY VALUE`) sets."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _GIT_VALUED else 1
    if i >= len(args) or args[i] != "config":
        return None
    rest, operands = args[i + 1 :], []
    skip = False
    for a in rest:
        if skip:
            skip = False
        elif a in _CONFIG_ONLY:
            return None
        elif a in _CONFIG_VALUED:
            skip = True
        elif not a.startswith("-") or a == "-":
            operands.append(a)
    if operands[:1] == ["set"]:
        operands = operands[1:]
    return (operands[0], operands[1]) if len(operands) >= 2 else None


def _crontab_installs(args: Sequence[str]) -> bool:
    """`crontab FILE`, `crontab -` or `crontab -e`: a crontab installed (not -l, -r)."""
    if any(a in ("-l", "-r", "-i") for a in args):
        return False
    return any(a == "-e" or not a.startswith("-") or a == "-" for a in args)


@check(PERSISTENCE_WRITE)
def configured_to_run(ctx: Context, img: Image) -> Iterator[Hit]:
    if not img.entry:
        return
    name = command_name(img)
    target = img.target.decode("utf-8", "surrogateescape")
    args = _texts(img)
    what = ""
    if name == "git":
        got = _git_config(args)
        if got is not None:
            key, value = got
            if key.lower() == "core.hookspath":
                what = f"set core.hooksPath to {value}: every later commit runs its hooks"
            elif key.lower().startswith("alias.") and value.startswith("!"):
                what = f"set {key} to a shell line ({value[:60]}): `git {key[6:]}` runs it"
    elif name == "crontab" and _crontab_installs(args):
        what = f"installed a crontab ({' '.join(args)[:60]}): it runs on schedule"
    if what:
        cwd = img.cwd.decode("utf-8", "surrogateescape")
        yield Hit(PERSISTENCE_WRITE, f"{name} {what}", f"{name}\0{what}", target,
                  {"command": name, "path": target, "cwd": cwd})  # fmt: skip
