"""The shim and log directories of `mcpshim run`, found before its server starts, on os
alone.

paths.Locations and shim.manifest answer the same question with platformdirs (21 ms to
load, with pathlib, re and tempfile), pathlib and tomllib: a client waits for all of it
before its server even starts. Here the plain cases are answered from the environment and
the manifest's `log_dir` line as mcpshim writes it, and everything else is left to them
(tests hold the two to the same answers): an XDG variable or HOME that is not an absolute
path (platformdirs' versions differ there), a path pathlib would write differently, a
manifest whose `log_dir` line is not a plain string. Only the log directory is read from
the manifest: a manifest broken elsewhere is said by the commands that read the rest.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from mcpshim.paths import Locations

__all__ = ["RunDirs", "located", "run_dirs"]

APP = "mcpshim"  # as paths.APP
_MANIFEST_MAX = 1 << 20  # more than any manifest mcpshim writes: left to shim.manifest


class RunDirs:
    """The session's shim directory and the log its shims are pinned to, as paths.Locations
    names them (the same attributes, strings), until the server runs (`locations`)."""

    __slots__ = ("_located", "log_dir", "shim_dir")

    def __init__(self, shim_dir: str, log_dir: str) -> None:
        self.shim_dir, self.log_dir = shim_dir, log_dir
        self._located: Locations | None = None

    @property
    def log_file(self) -> str:
        return self.log_dir + "/exec.log"

    @property
    def lock_file(self) -> str:
        return self.log_dir + "/exec.log.lock"

    def locations(self) -> Locations:
        if self._located is None:
            from mcpshim.paths import Locations

            self._located = Locations(_pathlib(self.shim_dir), _pathlib(self.log_dir))
        return self._located

    def __repr__(self) -> str:
        return f"RunDirs({self.shim_dir!r}, {self.log_dir!r})"


def located(where: Locations | RunDirs) -> Locations:
    """paths.Locations of either: what the session's later work takes."""
    return where.locations() if isinstance(where, RunDirs) else where


def run_dirs(shim_dir: str | None, log_dir: str | None) -> RunDirs:
    """`run --dir/--log-dir` (None: not given) as paths.Locations would have them."""
    shim = _normal(shim_dir) if shim_dir is not None else _user_dir("XDG_DATA_HOME", "share")
    if shim is None:
        from mcpshim.paths import default_shim_dir

        shim = str(default_shim_dir() if shim_dir is None else _pathlib(shim_dir))
    logs = _normal(log_dir) if log_dir is not None else _pinned_log_dir(shim)
    if logs is None:
        from mcpshim.shim.manifest import locations_for

        given = None if log_dir is None else _pathlib(log_dir)
        return RunDirs(shim, str(locations_for(_pathlib(shim), given).log_dir))
    return RunDirs(shim, logs)


def _pathlib(p: str) -> Path:
    from pathlib import Path

    return Path(p)


def _normal(p: str) -> str | None:
    """P when pathlib writes it as it is (no `//`, `.` part or trailing `/`), else None."""
    if p == "/":
        return p
    if not p or p == "." or "//" in p or "/./" in p or p.startswith("./"):
        return None
    return None if p.endswith(("/", "/.")) else p


def _user_dir(var: str, leaf: str) -> str | None:
    """platformdirs' user_data_dir (XDG_DATA_HOME, ~/.local/share) or user_state_dir
    (XDG_STATE_HOME, ~/.local/state) for mcpshim, then `shims` or `log` in it: paths'
    defaults. None where platformdirs' versions differ, or pathlib would write it
    otherwise."""
    value = os.environ.get(var, "")
    if not value:
        home = os.environ.get("HOME", "")
        if not home.startswith("/"):
            return None
        value = os.path.expanduser(f"~/.local/{leaf}")
    elif not value.startswith("/"):
        return None
    base = _normal(value)
    if base is None:
        return None
    return f"{base.rstrip('/')}/{APP}/{'shims' if leaf == 'share' else 'log'}"


def _pinned_log_dir(shim_dir: str) -> str | None:
    """The manifest's log_dir (shim.manifest.locations_for's answer), the default log
    directory when there is no manifest; None when it is not read here."""
    try:
        fd = os.open(shim_dir + "/manifest.toml", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return _user_dir("XDG_STATE_HOME", "state")
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _MANIFEST_MAX + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > _MANIFEST_MAX:
        return None
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return None
    found = _log_dir_line(text)
    return None if found is None else _normal(found)


def _log_dir_line(text: str) -> str | None:
    """The value of the one top-level line `log_dir = "..."`, written as tomli_w writes a
    string that needs no escape; None for anything else that mentions log_dir there, or
    a multi-line string (whose lines are not keys)."""
    found: str | None = None
    for line in text.split("\n"):
        if line.startswith("["):
            break
        if '"""' in line or "'''" in line:
            return None
        if "log_dir" not in line:
            continue
        value = line.removeprefix('log_dir = "').removesuffix('"')
        if found is not None or len(value) != len(line) - 12 or not _plain(value):
            return None
        found = value
    return found


def _plain(s: str) -> bool:
    """A TOML basic string's content that means itself: no quote, backslash or control."""
    return s.isprintable() and '"' not in s and "\\" not in s
