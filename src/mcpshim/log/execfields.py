"""An exec record's fields from its cwd on, decoded: the one decoding every reader uses.

A log repeats its command lines: the fields from the cwd on (cwd, command, target, the path
the caller exec'd, session, PATH, redactions, the shell's line, argv) are the same bytes for
every run of one command in one place and session, a few thousand distinct tails in a
million records. `decode_tail` decodes them (or says why the record is refused) and
`Tails` keeps each distinct tail decoded once, by its bytes: execlog's reader and
log.rows (and through it the session index) cut a record at its tenth field and look the
rest up there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from mcpshim.log.parentfield import parent_fields

__all__ = ["EXEC_HEAD", "TAIL_AT", "Tail", "Tails", "decode_tail", "int_field"]

EXEC_HEAD = b"\0R\0=1\0=exec\0="  # how every exec record starts

#: an exec record's framed fields before its tail: version, kind, boot time, uptime, boot
#: id, pid, ppid, start, parent start (`piece.split(b"\0=", TAIL_AT)[-1]` is the tail)
TAIL_AT = 10


class Tail(NamedTuple):
    """An exec record's fields from its cwd on; `execlog.exec_record` puts it together with
    the fields before it."""

    cwd: bytes
    cwd_unknown: str
    shim: str
    target: bytes
    invoked_as: bytes
    session: str
    path: bytes
    redactions: tuple[str, ...]
    parent_cmdline: bytes
    args: tuple[bytes, ...]
    parent_argv: tuple[bytes, ...] = ()


def int_field(b: bytes) -> int | None:
    """A pid or a tick count; anything longer than 18 digits is not one (unknown)."""
    if b.isdigit() and len(b) <= 18:  # the common cases first, without raising
        return int(b)
    if not b or len(b) > 19:
        return None
    try:
        return int(b)
    except ValueError:
        return None


#: what a shim writes for a cwd it could not resolve (a path starts with /)
_CWD_REASONS = {
    b"?no-search": "not searchable by the process",
    b"?unresolvable": "not resolvable (deleted, or outside the process's root)",
}


def decode_tail(f: Sequence[bytes]) -> Tail | str:
    """The fields from the cwd on (cwd, shim, target, invoked as, session, PATH,
    redactions, parent, argc, args...), or why the record is refused."""
    if len(f) < 9:
        return "exec record too short"
    argc = int_field(f[8])
    args = tuple(f[9:])
    if argc is None or argc != len(args):
        return "exec record argument count does not match"
    cwd, cwd_unknown = f[0], ""
    if not cwd.startswith(b"/"):  # "" and "." came from older shims, in a deleted directory
        cwd, cwd_unknown = b"", _CWD_REASONS.get(cwd, "not resolved by the shim")
    red = f[6]
    pcmd, pargv = parent_fields(f[7])
    return Tail(
        cwd,
        cwd_unknown,
        f[1].decode("utf-8", "replace"),
        f[2],
        f[3],
        f[4].decode("utf-8", "replace"),
        f[5],
        tuple(sorted(set(red.decode("ascii", "replace").split(",")))) if red else (),
        pcmd,
        args,
        pargv,
    )


class Tails:
    """Each distinct tail decoded once, by its bytes. `index(raw)` is its place in `tails`,
    -1 for one the reader refuses or cuts otherwise (a NUL inside a field: then the whole
    record takes the general path, which says what is wrong); remembered too, since the
    same bad bytes repeat (`ids`: raw -> index, a hot loop's first look). `nuls[i]`: the
    NULs of a whole record with tail i and no NUL inside a field before it. With `limit`,
    the table starts again when full and `epoch` counts up: an index holds until the next
    `index` call (keep the Tail, not the index)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.epoch = 0
        self.tails: list[Tail] = []
        self.nuls: list[int] = []
        self.ids: dict[bytes, int] = {}

    def index(self, raw: bytes) -> int:
        tid = self.ids.get(raw)
        if tid is None:
            tid = self._add(raw)
        return tid

    def _add(self, raw: bytes) -> int:
        if self.limit is not None and len(self.ids) >= self.limit:
            self.tails.clear()  # in place: readers hold the list
            self.nuls.clear()
            self.ids.clear()
            self.epoch += 1
        tid = -1
        if raw.count(b"\0") == raw.count(b"\0="):
            tail = decode_tail(raw.split(b"\0="))
            if not isinstance(tail, str):
                tid = len(self.tails)
                self.tails.append(tail)
                self.nuls.append(TAIL_AT + 1 + raw.count(b"\0"))  # the tag's, each separator
        self.ids[raw] = tid
        return tid
