"""How `mcpshim run` starts its command: checked first as a shell would (`runnable`: 127
when it is not there, 126 when it may not be run; traced or not, one status and one
message), then spawned in a process group of its own with SIGPIPE and SIGXFSZ at their
defaults (`posix_spawn`); and the subreaper that keeps its family (Linux). Light to import:
`run` loads it before its server starts (supervise.launch: os, signal and stat only)."""

from __future__ import annotations

import os
import signal
import stat
import sys

from mcpshim.errors import McpshimError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["SpawnError", "posix_spawn", "runnable", "set_child_subreaper"]

_PR_SET_CHILD_SUBREAPER = 36
LINUX = sys.platform.startswith("linux")


class SpawnError(McpshimError):
    """The command could not be started; exit codes follow the shell (127, 126)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def set_child_subreaper() -> bool:
    """Become the reaper of orphaned descendants (Linux >= 3.4); False where unsupported.
    libc through the running program's own symbols: find_library would run ldconfig. The
    C module's own dlsym and call come first: the `ctypes` package takes 3 ms to load,
    before the server starts; it is the way where they are not there."""
    if not LINUX:
        return False
    try:
        import _ctypes

        prctl = _ctypes.dlsym(_ctypes.dlopen(None, 0), "prctl")  # type: ignore[arg-type]
        return int(_ctypes.call_function(prctl, (_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))) == 0
    except (ImportError, OSError, AttributeError, TypeError):
        pass
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def posix_spawn(path: str, argv: list[str], env: dict[str, str], actions: Any) -> int:
    sigdef = (signal.SIGPIPE, signal.SIGXFSZ)  # Python ignores them; the command must not
    return os.posix_spawn(path, argv, env, file_actions=actions, setpgroup=0, setsigdef=sigdef)


def runnable(cmd: str, path: str) -> None:
    """What a shell says of a command it cannot run: 127 when it is not there, 126 when
    it is no file it may execute; traced or not, the same status and message."""
    try:
        st = os.stat(path)
    except OSError as exc:
        code = 127 if isinstance(exc, (FileNotFoundError, NotADirectoryError)) else 126
        raise SpawnError(f"{cmd}: {exc.strerror}" if code == 127 else
                         f"{cmd}: cannot run: {exc.strerror}", code) from None  # fmt: skip
    if stat.S_ISDIR(st.st_mode):
        raise SpawnError(f"{cmd}: cannot run: Is a directory", 126)
    if not os.access(path, os.X_OK):
        raise SpawnError(f"{cmd}: cannot run: Permission denied", 126)
