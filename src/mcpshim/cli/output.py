"""Files a command was told to write (`-o FILE`, `-o DIR`): all through base.safewrite, so
none is written through a symlink or left half-written, and a failure is one usage error
that names the file."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from mcpshim.base import safewrite
from mcpshim.errors import UsageError

__all__ = ["output_dir", "write_output"]


def write_output(
    path: Path,
    text: str | bytes,
    *,
    dir_fd: int | None = None,
    shown: Path | None = None,
    exclusive: bool = False,
    mode: int | None = None,
    parents: bool = False,
) -> None:
    """Write `text` as `path` (a name in `dir_fd` when given; `shown` is what errors call
    it). `exclusive`: an existing file is an error (`--force` lets a command replace it);
    `parents`: make the missing directories above it."""
    shown = shown or path
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    try:
        if parents and dir_fd is None:
            os.makedirs(path.parent, exist_ok=True)
        safewrite.write_file(path, data, mode, dir_fd=dir_fd, exclusive=exclusive)
    except FileExistsError:
        raise UsageError(f"{shown} exists (use --force to overwrite)") from None
    except OSError as exc:
        raise UsageError(f"{shown}: cannot write: {exc.strerror or exc}") from None


@contextlib.contextmanager
def output_dir(path: Path) -> Iterator[int]:
    """The directory `-o DIR` names, made when missing; refused when it is a symlink."""
    try:
        fd = safewrite.open_dir(path, create=True)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        yield fd
    finally:
        os.close(fd)
