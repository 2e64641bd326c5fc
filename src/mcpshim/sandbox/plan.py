"""From a lock entry to the rules `run --contain` applies, and what they leave open.

Execute: every executable the lock approved for the server (its own program, what it ran
outside tool calls, every tool's), each file the kernel opens to run one of them (binfmt),
the shims and the tracer. Connect: the TCP ports of the destinations the lock lists, when
it lists any and every TCP one has a port (a Unix socket or UDP destination is no TCP
port: it leaves the TCP rules as they are, and stays unrestricted); MPTCP sockets are then
refused (seccomp: Landlock's port rules do not hold them). Write: only beneath the
directories asked for and the log directory (the shims write their records there), when
asked. Read: everything but the credential files here that the lock does not list
(log.filetable; sandbox.reads says how and what that cannot hold). UDP, Unix sockets and
listening stay open.

Pure but for the file system reads that find interpreters; `contained` builds the ruleset.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcpshim.contract.identity import in_proc
from mcpshim.contract.lockfile import ServerApproval
from mcpshim.sandbox import seccomp
from mcpshim.sandbox.binfmt import started_by

__all__ = [
    "DEVICES",
    "Allowed",
    "Plan",
    "approved_files",
    "approved_reads",
    "is_unix",
    "make_plan",
    "ports_of",
]

#: character devices anyone may write (`> /dev/null`), allowed when writes are restricted
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom")
_NET_ABI = 4  # Landlock's TCP connect/bind rules
_FIRST_NET_KERNEL = "6.7"


@dataclass(frozen=True)
class Allowed:
    """A file the family may execute, and why it may."""

    path: str
    why: str


@dataclass(frozen=True)
class Plan:
    server: str
    lock: str
    execute: tuple[Allowed, ...]
    missing: tuple[str, ...]  # approved paths not on this machine (nothing to allow)
    write: tuple[str, ...] | None  # None: writes are not restricted
    connect: tuple[int, ...] | None  # None: connections are not restricted
    open_net: str  # why connections are not restricted ("" when they are)
    notes: tuple[str, ...]  # what this kernel leaves unrestricted
    unix: tuple[str, ...] = ()  # the Unix socket destinations the lock lists (not restricted)
    read: tuple[str, ...] = ()  # credential files (or directories) reading is refused for

    def restricts(self) -> list[str]:
        return (
            ["execute"]
            + (["write"] if self.write is not None else [])
            + (["connect"] if self.connect is not None else [])
            + (["read"] if self.read else [])
        )

    def payload(self, abi: int) -> dict[str, Any]:
        """The session-start record's `contain` object."""
        return {
            "state": "landlock",
            "abi": abi,
            "lock": self.lock,
            "server": self.server,
            "restricts": self.restricts(),
            "execute": [{"path": a.path, "why": a.why} for a in self.execute],
            "missing": list(self.missing),
            "write": list(self.write) if self.write is not None else None,
            "connect": list(self.connect) if self.connect is not None else None,
            "connect_open": self.open_net,
            "read_refused": list(self.read),
            "mptcp": "refused" if self.connect is not None else "not restricted",
            "not_restricted": self.unrestricted(),
            "notes": list(self.notes),
        }

    def unrestricted(self) -> list[str]:
        """What the family may still do on the network, whatever the lock says."""
        unix = f" (the lock lists {_shown(self.unix)})" if self.unix else ""
        return [
            "UDP",
            f"Unix sockets{unix}",
            "listening",
            *(["TCP connects"] if self.connect is None else []),
        ]

    def summary(self, abi: int) -> str:
        """The line `run` prints on start."""
        parts = [f"execute for {self.server}: " + ", ".join(f"{a.path} ({a.why})"
                                                          for a in self.execute)]  # fmt: skip
        parts.append(
            "write: only beneath " + ", ".join(self.write)
            if self.write is not None
            else "write: not restricted (--contain-write DIR)"
        )
        if self.read:
            parts.append(f"read: refused for {len(self.read)} credential file(s) the lock "
                         f"does not list ({_shown(self.read)})")  # fmt: skip
        if self.connect is not None:
            ports = ", ".join(map(str, self.connect))
            parts.append(f"connect: TCP ports {ports} only, MPTCP sockets refused")
        else:
            parts.append(f"connect: not restricted ({self.open_net})")
        parts.append("not restricted: " + ", ".join(self.unrestricted()))
        head = f"contained by Landlock ABI {abi} ({os.uname().release})"
        tail = f" ({'; '.join(self.notes)})" if self.notes else ""
        return f"{head}: {'; '.join(parts)}{tail}"


def is_unix(destination: str) -> bool:
    """A Unix socket's destination as the lock writes it: a path, `@name` (abstract), or
    `(unnamed)` (family.netfacts.destination)."""
    return destination.startswith(("/", "@")) or destination == "(unnamed)"


def _shown(items: Sequence[str]) -> str:
    return ", ".join(items[:3]) + (", ..." if len(items) > 3 else "")


def ports_of(destinations: Iterable[str]) -> tuple[set[int], list[str]]:
    """The TCP ports of `host:port` destinations, and the destinations that name none
    (UDP ones, marked ` (udp)`, and Unix sockets are neither: no TCP port rule is about
    them, and Landlock restricts neither)."""
    ports: set[int] = set()
    portless: list[str] = []
    for d in destinations:
        if d.endswith(" (udp)") or is_unix(d):
            continue
        host, sep, port = d.rpartition(":")
        bare_v6 = ":" in host and not host.startswith("[")  # 2001:db8::1 names no port
        if sep and port.isdigit() and 0 < int(port) < 65536 and host and not bare_v6:
            ports.add(int(port))
        else:
            portless.append(d)
    return ports, portless


def _approved(server: ServerApproval) -> list[str]:
    boundaries = [server.startup, *(t.boundary for t in server.tools.values())]
    paths = [server.program.path] if server.program is not None else []
    paths += [e.path for b in boundaries for e in b.executables]
    return list(dict.fromkeys(paths))


def _connect(server: ServerApproval, abi: int) -> tuple[tuple[int, ...] | None, str]:
    """The TCP ports the family may connect to, or None and why any port is allowed."""
    boundaries = [server.startup, *(t.boundary for t in server.tools.values())]
    listed = [d for b in boundaries for d in b.destinations]
    ports, portless = ports_of(listed)
    if not listed:
        return None, "the lock lists no network destinations"
    if portless:
        return None, f"the lock lists destinations without a port: {_shown(portless)}"
    if not ports:
        return None, "the lock lists no TCP destinations"
    if abi < _NET_ABI:
        return None, f"Landlock ABI {abi} has no network rules; Linux {_FIRST_NET_KERNEL}+ has"
    why = seccomp.available()
    if why is not None:  # Landlock's port rules do not hold MPTCP: no rule without the filter
        return None, f"MPTCP sockets would pass the port rules and {why}"
    return tuple(sorted(ports)), ""


def approved_reads(server: ServerApproval) -> list[str]:
    """The credential files the lock lists for the server (any tool's, or its own)."""
    boundaries = [server.startup, *(t.boundary for t in server.tools.values())]
    return list(dict.fromkeys(p for b in boundaries for p in b.credential_files))


def _unix(server: ServerApproval) -> tuple[str, ...]:
    boundaries = [server.startup, *(t.boundary for t in server.tools.values())]
    found = [d for b in boundaries for d in b.destinations if is_unix(d)]
    return tuple(dict.fromkeys(found))


def approved_files(server: ServerApproval) -> tuple[list[str], list[str], list[str]]:
    """The lock's executables for `server`: (files here, paths not on this machine, paths
    in /proc). A /proc path (`/proc/self/exe`, from an approval made before the tracer
    named what it ran) is never opened here: here it would name mcpshim's interpreter."""
    here: list[str] = []
    missing: list[str] = []
    proc: list[str] = []
    for path in _approved(server):
        if in_proc(path):
            proc.append(path)
        elif os.path.isfile(path):
            here.append(path)
        else:
            missing.append(path)
    return here, missing, proc


def make_plan(
    server: ServerApproval,
    lock: str,
    abi: int,
    shims: Mapping[str, str],
    tracer: str | None,
    path_env: str,
    write: Sequence[str] | None,
    log_dir: str,
    shell: tuple[str, str] | None = None,
    shim_notes: Sequence[str] = (),
    read: Sequence[str] = (),
) -> Plan:
    """The rules for `server`'s family. `shims`: shim file -> why it is allowed; `shell`:
    the shims' interpreter and why, when they need one the lock did not approve
    (sandbox.shims); `tracer`: strace's path when the session is traced (it runs inside
    the domain, as the server's parent)."""
    wanted: dict[str, str] = {}
    here, missing, proc = approved_files(server)
    for path in here:
        wanted.setdefault(path, "approved")
    for path, why in shims.items():
        wanted.setdefault(path, why)
    if shell is not None:
        wanted.setdefault(*shell)
    if tracer is not None:
        wanted.setdefault(tracer, "the tracer (strace)")
    for path in list(wanted):
        for extra, why in started_by(path, path_env):
            if os.path.isfile(extra):
                wanted.setdefault(extra, why)
    notes: list[str] = list(shim_notes)
    if proc:
        notes.append(
            f"not allowed: {_shown(proc)} (the lock names a /proc path, which names a "
            "different file in each process: approve a session again, and the tracer names "
            "the file it ran)"
        )
    connect, open_net = _connect(server, abi)
    if abi < 2:
        notes.append(f"Landlock ABI {abi}: renaming or linking a file into another directory fails")
    if write is not None and abi < 3:
        notes.append(f"Landlock ABI {abi}: truncating a file is not restricted")
    dirs = None if write is None else tuple(dict.fromkeys([*write, log_dir]))
    return Plan(
        server.name,
        lock,
        tuple(Allowed(p, w) for p, w in wanted.items()),
        tuple(missing + proc),
        dirs,
        connect,
        open_net,
        tuple(notes),
        _unix(server),
        tuple(read),
    )
