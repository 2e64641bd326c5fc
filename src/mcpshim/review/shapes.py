"""What a process image is, in the words review uses: its command name, operands, subcommand,
the -c line of a shell, and the argument shape baselines record. Rules, baselines and
departures all read an image through these, so they agree on what "the same" means.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re

from mcpshim.family.tree import Image

__all__ = [
    "GIT_EXEC_DIRS",
    "SHELLS",
    "SUBCOMMANDS",
    "canonical",
    "command_name",
    "matches_any",
    "name_key",
    "name_pattern",
    "operands",
    "same_file",
    "shape",
    "shell_line",
    "subcommand",
    "under",
]

#: where git keeps the helpers it runs itself (`git --exec-path`): git's own, not a shadow
GIT_EXEC_DIRS = (
    "/usr/lib/git-core",
    "/usr/libexec/git-core",
    "/usr/local/libexec/git-core",
    "/opt/homebrew/opt/git/libexec/git-core",
    "/Library/Developer/CommandLineTools/usr/libexec/git-core",
    "/Applications/Xcode.app/Contents/Developer/usr/libexec/git-core",
)


@functools.lru_cache(maxsize=4096)
def canonical(path: str) -> str:
    """One spelling per file: the directory resolved, the name kept (/bin/git is
    /usr/bin/git where /bin links to usr/bin; /usr/bin/npm stays, not its script)."""
    if not path.startswith("/"):
        return path
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


@functools.lru_cache(maxsize=4096)
def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def same_file(a: str, b: str) -> bool:
    """Two spellings of one executable: by device and inode, or (a file that is gone) by
    where they lead. Never by spelling alone: /bin/git and /usr/bin/git are one file."""
    if a == b:
        return True
    ia, ib = _file_id(a), _file_id(b)
    if ia is not None and ib is not None:
        return ia == ib
    return os.path.realpath(a) == os.path.realpath(b)


def matches_any(path: str, patterns: tuple[str, ...]) -> bool:
    """A policy's list of executables (globs) against a path, by identity: a literal entry
    matches any spelling of its file, a glob matches the path or its canonical spelling."""
    for p in patterns:
        if any(ch in p for ch in "*?["):
            if fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(canonical(path), p):
                return True
        elif same_file(path, p):
            return True
    return False


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


#: programs whose first operand is a subcommand (`git log`, `docker run`, `kubectl get`):
#: for any other program the first operand is data (cp's source, curl's URL, sleep's 30,
#: pytest's node ids), which no approval should pin (issue 38)
SUBCOMMANDS = frozenset({
    "git", "npm", "npx", "yarn", "pnpm", "bun", "deno", "docker", "podman", "kubectl", "helm",
    "cargo", "rustup", "go", "pip", "pip3", "uv", "poetry", "hatch", "pipx", "conda", "apt",
    "apt-get", "dnf", "yum", "brew", "systemctl", "journalctl", "gh", "glab", "aws", "gcloud",
    "az", "terraform", "dotnet", "mvn", "gradle", "make", "gpg", "openssl", "ip", "vault",
    "nix", "mise", "asdf",
})  # fmt: skip


def shape(img: Image) -> str:
    """The argument shape baselines and approvals record: a shell's -c inner command word,
    the subcommand of a program that has them (SUBCOMMANDS), else none."""
    line = shell_line(img)
    if line is not None:
        words = line.split()
        return f"-c {words[0]}" if words else "-c"
    return subcommand(img) if command_name(img) in SUBCOMMANDS else ""


_TOKEN = re.compile(r"[A-Za-z0-9]+")


def _random(token: str, before: str = "", last: bool = False) -> bool:
    """A token a program made up for one run: mkdtemp's six characters (letters and digits
    mixed), a hex digest, a pid or a time stamp. `before`: the character ahead of it in
    its path component; `last`: nothing follows it there but an extension."""
    if (
        len(token) >= 6
        and token.isalnum()
        and any(c.isdigit() for c in token)
        and any(c.isalpha() for c in token)
    ):
        return True
    if len(token) >= 8 and all(c in "0123456789abcdef" for c in token.lower()):
        return True
    if len(token) >= 5 and token.isdigit():
        return True
    # mkdtemp's XXXXXX drawn from letters alone (a third of them: GuGfcB): six letters
    # closing a component after a separator, in a case no word is written in
    return (
        len(token) == 6
        and last
        and before in ".-_"
        and token.isalpha()
        and not (token.islower() or token.isupper() or token.istitle())
    )


def _component(part: str) -> str:
    tokens = list(_TOKEN.finditer(part))
    # the last token, or the one before an extension (browser-Zx9Qa1.sock)
    closing = {len(tokens) - 1}
    if len(tokens) > 1 and part[tokens[-2].end() :].startswith(".") and len(tokens[-1][0]) <= 4:
        closing.add(len(tokens) - 2)
    out, pos = [], 0
    for i, m in enumerate(tokens):
        before = part[m.start() - 1] if m.start() else ""
        out += [part[pos : m.start()], "*" if _random(m[0], before, i in closing) else m[0]]
        pos = m.end()
    return "".join([*out, part[pos:]])


def name_pattern(name: str) -> str:
    """A per-run name as its pattern, so a lock approved from one run holds for the next:
    `/tmp/org.chromium.Chromium.a1B2c3/SingletonSocket` -> `/tmp/org.chromium.Chromium.*/
    SingletonSocket`, `/tmp/pw-47113/browser-Zx9Qa1.sock` -> `/tmp/pw-*/browser-*.sock`.
    A word of the name's own (`chromium`, `browser`) is kept."""
    if not name.startswith(("/", "@")):
        return name
    return "/".join(_component(part) for part in name.split("/"))


# a template's random run closing a component: after its prefix's last '.' or '-'
# (mkdtemp's XXXXXX, Python's 8 of [a-z0-9_]), before an extension, or a run a pattern has
# already starred in part; Python's default name (tmp and 8), its pattern's forms too: the
# key of a name and of its pattern agree whatever the template drew
_CLOSING_RUN = re.compile(
    r"^(.*[.-])(?:[A-Za-z0-9_]*\*[A-Za-z0-9_*]*|[A-Za-z0-9_]{6,12})((?:\.[A-Za-z]{1,4})?)$"
)
_PY_TMP = re.compile(r"^(?:tmp[a-z0-9_]{8}|tmp[a-z0-9_]*\*[a-z0-9_*]*|\*[a-z0-9_*]*)$")


def name_key(name: str) -> str:
    """What two per-run names are compared by: their pattern with every run a name template
    fills closing a component taken for one, whatever it drew (a word's letters alone, as
    mkdtemp does about one run in sixty, which name_pattern keeps). Looser than the
    pattern: `/tmp/app.socket` and `/tmp/app.sockex` are one name by it."""
    if not name.startswith(("/", "@")):
        return name
    return "/".join(_key_part(part) for part in name.split("/"))


def _key_part(part: str) -> str:
    if _PY_TMP.match(part):
        return "*"  # as its pattern is when the draw has a digit: one token, starred
    m = _CLOSING_RUN.match(part)
    return f"{_component(m[1])}*{m[2]}" if m else _component(part)
