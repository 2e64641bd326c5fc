"""What the kernel opens to run a program, read from the file: an ELF program's interpreter
(PT_INTERP, the dynamic loader) and a script's `#!` interpreter. Both are opened for
execution, so Landlock must allow them for the program to start at all; shared libraries
are not (the loader maps them with read and mmap).

And which programs are interpreters in the other sense: they run whatever script or code
they are handed, so approving one for execution approves every script it may be given.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
from collections.abc import Iterator

__all__ = ["BINPRM_BUF", "elf_interpreter", "interpreter_kind", "shebang", "started_by"]

BINPRM_BUF = 256  # Linux reads this much of a file to decide how to run it (the #! line)
_PT_INTERP = 3
_MAX_FILES = 8  # binfmt_script nests 4 deep (BINPRM_MAX_RECURSION); each may name a loader
_INTERPRETERS = re.compile(
    r"^(?:(?P<shell>sh|dash|bash|zsh|ksh|mksh|ash|busybox|fish|tcsh|csh)"
    r"|(?P<code>python[0-9.]*|node(?:js)?|deno|bun|perl[0-9.]*|ruby[0-9.]*|php[0-9.]*"
    r"|lua(?:jit|[0-9.]*)|tclsh[0-9.]*|Rscript|pwsh|osascript|[gm]?awk|java))$"
)


def elf_interpreter(head: bytes, fh_path: str) -> str | None:
    """The PT_INTERP path of an ELF file whose first bytes are `head`; None for a static
    binary or anything that is not ELF."""
    if not head.startswith(b"\x7fELF") or len(head) < 64:
        return None
    wide, little = head[4] == 2, head[5] == 1
    end = "<" if little else ">"
    try:
        if wide:
            (phoff,) = struct.unpack_from(end + "Q", head, 0x20)
            phentsize, phnum = struct.unpack_from(end + "HH", head, 0x36)
        else:
            (phoff,) = struct.unpack_from(end + "I", head, 0x1C)
            phentsize, phnum = struct.unpack_from(end + "HH", head, 0x2A)
        with open(fh_path, "rb") as fh:
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
            for i in range(phnum):
                at = i * phentsize
                if struct.unpack_from(end + "I", table, at)[0] != _PT_INTERP:
                    continue
                if wide:
                    (off,) = struct.unpack_from(end + "Q", table, at + 8)
                    (size,) = struct.unpack_from(end + "Q", table, at + 32)
                else:
                    (off,) = struct.unpack_from(end + "I", table, at + 4)
                    (size,) = struct.unpack_from(end + "I", table, at + 16)
                fh.seek(off)
                raw = fh.read(min(size, 4096)).split(b"\0", 1)[0]
                return os.fsdecode(raw) if raw else None
    except (OSError, struct.error):
        return None
    return None


def shebang(head: bytes) -> tuple[str, str] | None:
    """(interpreter, its one optional argument) of a `#!` line, as Linux splits it."""
    if not head.startswith(b"#!"):
        return None
    line = head[2:BINPRM_BUF].split(b"\n", 1)[0].strip(b" \t\r")
    if not line:
        return None
    interp, _, arg = line.replace(b"\t", b" ").partition(b" ")
    return os.fsdecode(interp), os.fsdecode(arg.strip())


def _env_program(arg: str, path_env: str) -> str | None:
    """The program `#!/usr/bin/env ARG` goes on to run, found on PATH as env would."""
    words = arg.split()
    while words and (words[0].startswith("-") or "=" in words[0]):
        if words[0] in ("-S", "--split-string"):
            words = words[1:]
            continue
        if words[0].startswith("-S"):
            words[0] = words[0][2:]
            continue
        words = words[1:]
    if not words:
        return None
    name = words[0]
    return name if "/" in name else shutil.which(name, path=path_env)


def started_by(path: str, path_env: str = "") -> Iterator[tuple[str, str]]:
    """(file, why) for every further file the kernel opens to run `path`, and for a script
    run through `env`, the program env runs (found on `path_env`): nested as the kernel
    nests them, a few files deep."""
    todo, seen = [path], 0
    while todo and seen < _MAX_FILES:
        current = todo.pop()
        seen += 1
        try:
            with open(current, "rb") as fh:
                head = fh.read(BINPRM_BUF)
        except OSError:
            continue
        interp = elf_interpreter(head, current)
        if interp is not None:
            yield interp, f"ELF interpreter of {current}"
            continue  # the loader is itself static
        line = shebang(head)
        if line is None:
            continue
        prog, arg = line
        if not prog.startswith("/"):
            continue  # relative to the caller's cwd: nothing to name in advance
        yield prog, f"#! interpreter of {current}"
        todo.append(prog)
        if os.path.basename(prog) == "env" and arg:
            found = _env_program(arg, path_env)
            if found is not None:
                yield found, f"what {current}'s #!{prog} {arg} runs"
                todo.append(found)


def interpreter_kind(path: str) -> str | None:
    """Whether the program at `path` runs scripts or code it is given ("shell", "code", by
    its name); None for other programs."""
    m = _INTERPRETERS.match(os.path.basename(path))
    if m is None:
        return None
    return "shell" if m.group("shell") else "code"
