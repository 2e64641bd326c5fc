"""What the kernel opens to run a program, read from real files: the ELF loader of a dynamic
program (none for the static loader itself), a script's #! interpreter, the program a
`#!/usr/bin/env` line goes on to run; and which programs count as interpreters."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mcpshim.sandbox.binfmt import elf_interpreter, interpreter_kind, shebang, started_by

TRUE = os.path.realpath("/bin/true")


def _head(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(256)


def test_a_dynamic_program_names_its_loader_and_the_loader_names_none() -> None:
    loader = elf_interpreter(_head(TRUE), TRUE)
    assert loader is not None and os.path.basename(loader).startswith("ld-")
    real = os.path.realpath(loader)
    assert elf_interpreter(_head(real), real) is None  # static: nothing more to open
    assert elf_interpreter(b"#!/bin/sh\n", TRUE) is None
    assert elf_interpreter(b"\x7fELF" + b"\0" * 60, "/nonexistent") is None  # unreadable


def test_shebang_is_split_as_linux_splits_it() -> None:
    assert shebang(b"#!/bin/sh\necho\n") == ("/bin/sh", "")
    assert shebang(b"#! /usr/bin/env  node --x y\n") == ("/usr/bin/env", "node --x y")
    assert shebang(b"#!\t/bin/bash -e\r\n") == ("/bin/bash", "-e")
    assert shebang(b"#!\n") is None and shebang(b"echo\n") is None


def test_started_by_follows_scripts_env_and_loaders(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "tool"
    shutil.copy(TRUE, tool)
    script = tmp_path / "run.sh"
    script.write_text("#!/usr/bin/env -S tool --flag\n")
    got = dict(started_by(str(script), str(bindir)))
    assert got["/usr/bin/env"] == f"#! interpreter of {script}"
    assert got[str(tool)] == f"what {script}'s #!/usr/bin/env -S tool --flag runs"
    loader = elf_interpreter(_head(TRUE), TRUE)
    assert loader in got and got[loader].startswith("ELF interpreter of ")
    relative = tmp_path / "rel.sh"
    relative.write_text("#!sh\n")  # relative to the caller's cwd: nothing to name
    assert list(started_by(str(relative))) == []
    assert list(started_by(str(tmp_path / "missing"))) == []


def test_interpreters_are_known_by_name() -> None:
    assert interpreter_kind("/usr/bin/dash") == "shell"
    assert interpreter_kind("/usr/bin/python3.11") == "code"
    assert interpreter_kind("/usr/bin/node") == "code"
    assert interpreter_kind("/usr/bin/git") is None
    assert interpreter_kind("/usr/bin/pythonista") is None
