"""The shells of a session that went through a shim, the latest N, kept small.

Coverage keeps them to tell whether a parent-evidence record's shell had its own record;
a million-record log has a few hundred thousand. An OrderedDict of (boot id, pid, start)
tuples took about 200 bytes each; here a canonical boot id (a lowercase UUID, as the
kernel writes it) and the two integers are packed into one int, exact (anything else
stays a tuple, which never equals an int), held in a dict with a deque for their order.
"""

from __future__ import annotations

import re
from collections import deque

__all__ = ["ShellSet", "shell_key"]

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_U64 = 1 << 64
_BOOTS: dict[str, int] = {}  # boot id -> its 128 bits, -1 when not a canonical UUID

Key = int | tuple[str, int | None, int | None]


def shell_key(boot: str, pid: int | None, start: int | None) -> Key:
    """One key per (boot, pid, start): the same triple always gives the same key, two
    different triples never do."""
    b = _BOOTS.get(boot)
    if b is None:
        b = int(boot.replace("-", ""), 16) if _UUID.fullmatch(boot) else -1
        if len(_BOOTS) < 4096:
            _BOOTS[boot] = b
    if (
        b >= 0
        and type(pid) is int
        and 0 <= pid < _U64
        and (start is None or (type(start) is int and 0 <= start < _U64 - 1))
    ):
        return (b << 128) | (pid << 64) | (0 if start is None else start + 1)
    return (boot, pid, start)


class ShellSet:
    """Insertion-ordered; adding a key already held moves nothing (as a dict's assignment)."""

    __slots__ = ("keys", "order")

    def __init__(self) -> None:
        self.keys: dict[Key, None] = {}
        self.order: deque[Key] = deque()

    def add(self, boot: str, pid: int, start: int | None, keep: int) -> None:
        """Hold (boot, pid, start); past `keep` held, the oldest goes."""
        k = shell_key(boot, pid, start)
        if k not in self.keys:
            self.keys[k] = None
            self.order.append(k)
            if len(self.keys) > keep:
                del self.keys[self.order.popleft()]

    def __contains__(self, ident: tuple[str, int | None, int | None]) -> bool:
        return shell_key(*ident) in self.keys

    def __len__(self) -> int:
        return len(self.keys)

    def update(self, other: ShellSet) -> None:
        """Add other's keys after ours, in its order, without dropping any."""
        for k in other.order:
            if k not in self.keys:
                self.keys[k] = None
                self.order.append(k)
