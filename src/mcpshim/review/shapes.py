"""What a process image is, in the words review uses: its command name, operands, subcommand,
the -c line of a shell, and the argument shape baselines record. Rules, baselines and
departures all read an image through these, so they agree on what "the same" means.
"""

from __future__ import annotations

import os

from mcpshim.family.tree import Image

__all__ = ["SHELLS", "command_name", "operands", "shape", "shell_line", "subcommand", "under"]

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"})


def under(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")


def command_name(img: Image) -> str:
    return img.command or os.path.basename(img.target).decode("utf-8", "replace")


# Options that take a value in the next argument, per command (enough to find operands).
_VALUE_OPTS: dict[str, frozenset[str]] = {
    "git": frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"}),
    "npm": frozenset({"--prefix", "-w", "--workspace", "--registry", "--cache"}),
    "make": frozenset({"-C", "-f", "--file", "--directory", "-j", "-I", "-o", "-W"}),
    "node": frozenset({"-r", "--require", "--import", "--loader", "-e", "--eval", "-p"}),
}
_SHORT_VALUE: dict[str, str] = {
    "ssh": "BbcDEeFIiJLlmOoPpQRSWw",
    "scp": "cDFiJlOoPSX",
    "sftp": "BbcDFiJloPRSs",
    "nc": "IiOpqsTVwWXx",
}


def operands(img: Image) -> list[str]:
    """Arguments that are not options or option values, as text (escapes kept by caller)."""
    name = command_name(img)
    long_vals = _VALUE_OPTS.get(name, frozenset())
    short_vals = _SHORT_VALUE.get(name, "")
    out: list[str] = []
    skip = False
    args = [a.decode("utf-8", "surrogateescape") for a in img.args]
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a == "--":
            out += args[i + 1 :]
            break
        if a.startswith("-") and len(a) > 1:
            if a in long_vals:
                skip = True
            elif short_vals and not a.startswith("--"):
                for j, ch in enumerate(a[1:], 1):
                    if ch in short_vals:
                        skip = j == len(a) - 1
                        break
            continue
        out.append(a)
    return out


def subcommand(img: Image) -> str:
    ops = operands(img)
    return ops[0] if ops else ""


def shell_line(img: Image) -> str | None:
    """The -c command string of a shell invocation, or None."""
    if command_name(img) not in SHELLS:
        return None
    seen_c = False
    args = img.args
    i = 0
    while i < len(args):
        a = args[i].decode("utf-8", "surrogateescape")
        if a == "--":
            i += 1
            break
        if len(a) > 1 and a[0] in "-+" and not a.startswith("--"):
            if a[1:] == "o":
                i += 1
            elif "c" in a[1:]:
                seen_c = True
            i += 1
            continue
        if a.startswith("--"):
            i += 1
            continue
        break
    if not seen_c or i >= len(args):
        return None
    return args[i].decode("utf-8", "surrogateescape")


def shape(img: Image) -> str:
    """The argument shape baselines record: the subcommand, or a shell's -c inner command word."""
    line = shell_line(img)
    if line is not None:
        words = line.split()
        return f"-c {words[0]}" if words else "-c"
    return subcommand(img)
