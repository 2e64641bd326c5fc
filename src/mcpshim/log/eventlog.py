"""Python's side of writing the exec log: mcpshim's own records (sessions, samples, MCP
calls, trace results), appended under the log's lock.

The lock is flock(2) on `exec.log.lock` (base.flock), the same lock rotation takes and
flock(1) users take by hand. Writers that append often (a session's supervisor, the relay's
recorder) used to open and lock it anew for every record: 0.4 ms of Python per record,
most of a tool call's recording cost. An `EventLog` keeps the lock file and the log open
instead, so a record costs an flock, a stat (has rotation renamed the log away?) and one
write(). flock belongs to the open file, which a forked child shares: after a fork both
files are opened anew, and a thread lock orders the threads of one process.
"""

from __future__ import annotations

import _thread
import errno
import fcntl
import os
import stat

from mcpshim.base import fdio
from mcpshim.base.flock import FileLock, LockTimeoutError, open_lock, take
from mcpshim.base.safewrite import make_private_dir
from mcpshim.log.frame import encode_record

TYPE_CHECKING = False
if TYPE_CHECKING:  # `run` writes its first record before its server starts, on few modules
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any, Protocol

    from mcpshim.paths import Locations

    class LogPlace(Protocol):
        """Where the log is: paths.Locations, or the strings `run` has before its server
        starts (shim.rundirs.RunDirs)."""

        @property
        def log_dir(self) -> str | os.PathLike[str]: ...
        @property
        def log_file(self) -> str | os.PathLike[str]: ...
        @property
        def lock_file(self) -> str | os.PathLike[str]: ...


_json_str: Callable[[str], str] | None
try:
    from _json import encode_basestring as _json_str
except ImportError:  # pragma: no cover - an interpreter without the C module: json's way
    _json_str = None

__all__ = ["EventLog", "append_event", "append_events", "encode_event", "log_lock"]

LOCK_TIMEOUT_S = 30.0
_BATCH_BYTES = 1 << 20  # append_many: at most this much (or one record) per write()


def log_lock(loc: Locations, timeout: float = LOCK_TIMEOUT_S) -> FileLock:
    """The log's lock (rotation). The lock file is never deleted, so flock(1) users agree."""
    make_private_dir(loc.log_dir)
    return FileLock(loc.lock_file, timeout)


def encode_event(kind: str, payload: Mapping[str, Any]) -> bytes:
    if kind == "exec" or not kind.replace("-", "").isalnum():
        raise ValueError(f"not an event kind: {kind!r}")
    body = _strings_json(payload)
    if body is None:
        import json

        # allow_nan=False: the reader refuses NaN and infinities (log.events): never write one
        body = json.dumps(
            payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
        )
    return encode_record(kind, [body.encode()])


def _strings_json(payload: Mapping[str, Any]) -> str | None:
    """json.dumps's text (as encode_event calls it) for an object of strings alone, on
    json's C string encoder, without loading json (and re): `run`'s first record is one,
    written before its server starts. A test holds the two to the same text."""
    if _json_str is None:
        return None
    if not all(type(k) is str and type(v) is str for k, v in payload.items()):
        return None
    items = sorted(payload.items())
    return "{" + ",".join(f"{_json_str(k)}:{_json_str(v)}" for k, v in items) + "}"


def _open(path: str, flags: int) -> int:
    """0600, and never through a symlink someone put in the log's place."""
    return os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)


class EventLog:
    """One writer's open handle on the log (see the module docstring)."""

    def __init__(self, loc: LogPlace, timeout: float = LOCK_TIMEOUT_S) -> None:
        self.loc = loc
        self.timeout = timeout
        self._pid = -1
        self._mutex = _thread.allocate_lock()
        self._lock_fd = self._log_fd = -1
        self._log_id: tuple[int, int] | None = None

    def append(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Append one record in one write(), under the log's lock."""
        self._write(encode_event(kind, payload))

    def append_many(self, records: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
        """Append records in order, as few write()s as fit _BATCH_BYTES, each whole under
        the lock (a trace's records at a session's end: one lock and stat per record
        were a third of writing them); how many were written."""
        batch: list[bytes] = []
        size = n = 0
        try:
            for kind, payload in records:
                data = encode_event(kind, payload)
                if batch and size + len(data) > _BATCH_BYTES:
                    full, batch, size = batch, [], 0
                    self._write(b"".join(full))
                batch.append(data)
                size += len(data)
                n += 1
        finally:  # (a record that cannot be encoded: those before it are written)
            if batch:
                self._write(b"".join(batch))
        return n

    def _write(self, data: bytes) -> None:
        if self._pid != os.getpid():
            self._mutex = _thread.allocate_lock()  # one held at fork by another thread stays held
            self._reopen()
        with self._mutex:
            if self._lock_fd < 0:  # first use, or the last try failed (retried each time)
                make_private_dir(self.loc.log_dir)
                self._lock_fd = open_lock(self.loc.lock_file)
            if not take(self._lock_fd, self.timeout):
                raise LockTimeoutError(self.loc.lock_file)
            try:
                self._current()
                fdio.write_all(self._log_fd, data)
            except OSError as exc:
                if exc.filename is not None:
                    raise
                # a failed write() names no file: name the log (ENOSPC, EFBIG, EIO)
                raise OSError(exc.errno, exc.strerror, str(self.loc.log_file)) from None
            finally:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _reopen(self) -> None:
        # The fds inherited from the parent are left alone: the child may have closed
        # them already, and their numbers may name something else by now.
        self._pid = os.getpid()
        self._lock_fd = self._log_fd = -1
        self._log_id = None

    def _current(self) -> None:
        """Point the log fd at the file now named exec.log (rotation renames it away)."""
        path = str(self.loc.log_file)
        try:
            st = os.stat(path)
            now: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            now = None
        if now is None or now != self._log_id:
            if self._log_fd >= 0:
                try:
                    os.close(self._log_fd)
                except OSError:
                    pass
            # O_NONBLOCK: a FIFO in the log's place fails the open (ENXIO) or the check
            # below instead of blocking; on a regular file it changes nothing.
            self._log_fd = _open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK)
            st = os.fstat(self._log_fd)
            if not stat.S_ISREG(st.st_mode):
                os.close(self._log_fd)
                self._log_fd = -1
                raise OSError(errno.EINVAL, "not a regular file", path)
            self._log_id = (st.st_dev, st.st_ino)


_WRITERS: dict[LogPlace, EventLog] = {}
_WRITERS_LOCK = _thread.allocate_lock()


def _writer(loc: LogPlace) -> EventLog:
    with _WRITERS_LOCK:
        writer = _WRITERS.get(loc)
        if writer is None:
            writer = _WRITERS[loc] = EventLog(loc)
    return writer


def append_event(loc: LogPlace, kind: str, payload: Mapping[str, Any]) -> None:
    """Append one mcpshim record under the log's lock, in one write()."""
    _writer(loc).append(kind, payload)


def append_events(loc: Locations, records: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
    """Append records in order under the log's lock (EventLog.append_many); how many."""
    return _writer(loc).append_many(records)
