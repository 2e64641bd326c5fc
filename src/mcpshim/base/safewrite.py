"""The one way mcpshim writes a whole file (a report, a lock, a baseline, a shim, its state):
never through a symlink, never half-written, never leaving a temporary file behind.

The data goes into a temporary file in the same directory (created O_EXCL|O_NOFOLLOW beside
the target, through a descriptor of that directory), is fsync'ed and renamed over the
target: a reader sees the old bytes or the new ones, and a write that fails (a full disk,
RLIMIT_FSIZE, a killed process aside) leaves the old file as it was and removes the
temporary file. A target that is a symlink is refused, not followed, and so is one that is
not a regular file; rename(2) replaces a name, never what it points to, so a symlink swapped
in after the check is replaced, not followed. `open_dir` gives the directory a command was
told to fill (`report --all -o DIR`), refusing one that is itself a symlink. Appends to a
file mcpshim keeps (`open_append`) never follow a symlink either.

A backup is created with link(2) (`create_exclusive`), which fails when the name exists, so
an existing backup is never replaced. `replace_atomically` is wrap-config's edit of a client
config the user named: it writes where a symlinked config points, as an editor does.
"""

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:  # (pathlib and contextlib are not loaded: `run` writes before its server starts)
    StrPath = str | os.PathLike[str]

__all__ = [
    "create_exclusive",
    "make_private_dir",
    "open_append",
    "open_dir",
    "replace_atomically",
    "write_file",
]

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _refused(path: StrPath, why: str) -> OSError:
    return OSError(errno.ELOOP if "symlink" in why else errno.EINVAL, why, str(path))


def open_dir(path: StrPath, create: bool = False, mode: int = 0o777) -> int:
    """A descriptor of the directory `path` (created when `create`), which must not itself
    be a symlink (the directories above it are the user's path, followed as named)."""
    if create:
        try:
            os.makedirs(path, mode=mode)
        except FileExistsError:
            pass
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(path):
            raise _refused(
                path, "is a symlink: mcpshim writes into no directory through one"
            ) from None
        raise


def _existing(name: str, dfd: int, shown: StrPath) -> os.stat_result | None:
    try:
        st = os.lstat(name, dir_fd=dfd)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise _refused(shown, "is a symlink: mcpshim writes no file through one")
    if not stat.S_ISREG(st.st_mode):
        raise _refused(shown, "is not a regular file")
    return st


def _same(name: str, dfd: int, data: bytes) -> bool:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(len(data) + 1) == data
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_file(
    path: StrPath,
    data: bytes,
    mode: int | None = None,
    *,
    dir_fd: int | None = None,
    exclusive: bool = False,
    unchanged_ok: bool = False,
    durable: bool = True,
    owner: tuple[int, int] | None = None,
) -> bool:
    """Write `data` as the file `path` (a name in `dir_fd` when given), whole or not at all.

    `mode`: the file's mode; None keeps an existing file's, else the umask's default.
    `exclusive`: FileExistsError when the name exists (nothing replaced). `unchanged_ok`:
    a file that already holds `data` is left alone (False returned). `durable`: fsync the
    file and the directory (a crash leaves the old file or the new one)."""
    own_dir = dir_fd is None
    dfd = open_dir(os.path.dirname(path) or ".") if dir_fd is None else dir_fd
    try:
        name = os.path.basename(path) if own_dir else os.fspath(path)
        if "/" in name or name in ("", ".", ".."):
            raise _refused(path, "is not a file name")
        old = _existing(name, dfd, path)
        if old is not None and exclusive:
            raise FileExistsError(errno.EEXIST, "exists", str(path))
        if old is not None and unchanged_ok and old.st_size == len(data) and _same(name, dfd, data):
            return False
        _stage_and_rename(name, dfd, data, mode, old, exclusive, durable, owner)
        return True
    finally:
        if own_dir:
            os.close(dfd)


def _stage_and_rename(
    name: str,
    dfd: int,
    data: bytes,
    mode: int | None,
    old: os.stat_result | None,
    exclusive: bool,
    durable: bool,
    owner: tuple[int, int] | None,
) -> None:
    if mode is None and old is not None:
        mode = stat.S_IMODE(old.st_mode)
    if owner is None and old is not None:
        owner = (old.st_uid, old.st_gid)
    tmp = f".{name[:64]}.{os.urandom(6).hex()}.tmp"  # (secrets: 5 ms of imports at run's start)
    fd = os.open(tmp, _FLAGS, 0o666 if mode is None else 0o600, dir_fd=dfd)
    try:
        try:
            _write_all(fd, data)
            if mode is not None:
                os.fchmod(fd, mode)
            if owner is not None and os.geteuid() == 0:
                os.fchown(fd, *owner)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
            os.unlink(tmp, dir_fd=dfd)
        else:
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except FileNotFoundError:
            pass
        raise
    if durable:
        try:
            os.fsync(dfd)
        except OSError:  # some filesystems refuse a directory's fsync
            pass


def open_append(path: StrPath, mode: int = 0o600) -> int:
    """A descriptor appending to `path` (created `mode` when missing): never through a
    symlink, never a FIFO's blocking open, only a regular file."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refused(path, "is a symlink: mcpshim appends to no file through one") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _refused(path, "is not a regular file")
    return fd


def replace_atomically(path: StrPath, data: bytes, like: os.stat_result) -> None:
    """Replace the file `path` points at (wrap-config's edit of a client config the user
    named: through its symlinks, as an editor writes), keeping its mode and owner."""
    real = os.path.realpath(path)
    write_file(real, data, stat.S_IMODE(like.st_mode), owner=(like.st_uid, like.st_gid))


def create_exclusive(path: StrPath, data: bytes, like: os.stat_result) -> None:
    """Create `path` with `data` complete, or raise FileExistsError and leave it alone."""
    write_file(
        path, data, stat.S_IMODE(like.st_mode), exclusive=True, owner=(like.st_uid, like.st_gid)
    )


def make_private_dir(path: StrPath) -> None:
    """mkdir -p where every directory created is 0700 (Path.mkdir gives its mode to the last
    one only): what mcpshim keeps is the user's alone."""
    missing: list[str] = []
    p = os.path.abspath(path)
    while not os.path.exists(p) and not os.path.islink(p):
        missing.append(p)
        p = os.path.dirname(p)
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
