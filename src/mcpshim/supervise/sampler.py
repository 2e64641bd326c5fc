"""Sampling a supervised family: who is in it, who no shim saw, what sockets it holds.

Cost is the design constraint (a few per cent of one core at 100 ms with 50 processes).
On Linux a tick lists /proc once, reads one `stat` per family member (one pread of a file
it holds open: proc/statfds.py) and per pid it has never seen, and remembers pids it has
classified as outsiders: a pid leaves that set only when it disappears from /proc, and
reusing it inside one interval would need the pid counter to wrap. Details (exe, cmdline,
cwd, environment names, sockets) are read once per process, when it is first seen, and
again only when the addresses exec lays out change (an exec; a fork child seen before its
exec has its parent's command line; a title the process sets itself is no exec).
Elsewhere psutil does the same work, more slowly.

A new member is decided one tick later: a shim writes its record before it execs the
target, so by the next tick the log says whether a shim saw it; if none did, it is
"observed". Sockets are found by asking the kernel (sock_diag) for the LISTEN/ESTABLISHED
sockets of the family's network namespace and, only when a new one appears, mapping socket
inodes to family members through their fd tables. That pass runs on every tick that finds
a new member and otherwise every `socket_every` ticks (the supervisor makes it 500 ms): a
connection that an old member opens and closes between two passes is not seen.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil

from mcpshim.base.display import b64_fields, json_text
from mcpshim.log.execlog import ExecRecord
from mcpshim.log.follow import Follower
from mcpshim.proc.procinfo import (
    LINUX,
    Conn,
    ProcInfo,
    Stat,
    linux_info,
    proc_fields,
    psutil_conns,
    psutil_info,
    read_stat,
    socket_inodes,
    socket_table,
    start_ticks,
)
from mcpshim.proc.statfds import LastPid, StatFds
from mcpshim.supervise.session import utc_now

__all__ = ["Emit", "Member", "Sampler"]

Emit = Callable[[str, dict[str, Any]], None]
Identity = tuple[int, int | None]


# ---- the sampler -------------------------------------------------------------------------


@dataclass
class Member:
    stat: Stat
    info: ProcInfo | None
    state: str = "pending"  # pending -> shimmed | observed
    sockets: set[tuple[int, str]] = field(default_factory=set)
    seen: str = ""  # when this image was first seen (an observed record says then, not later)
    clone: bool = False  # seen only as a fork of its parent, before any exec of its own

    @property
    def identity(self) -> Identity:
        return (self.stat.pid, self.stat.start)


class Sampler:
    """The family below `root` (the supervisor), sampled one tick at a time."""

    def __init__(
        self,
        session: str,
        boot_id: str,
        root: int,
        emit: Emit,
        tail: Follower | None,
        socket_every: int = 1,
    ) -> None:
        self.session = session
        self.socket_every = max(1, socket_every)
        self.boot_id = boot_id
        self.root = root
        self._emit = emit
        self._tail = tail
        self._outsiders: set[int] = set()
        self._members: dict[int, Member] = {}
        self._shimmed: dict[Identity, bytes] = {}
        self._tool_exes: set[bytes] = set()
        self._sock_keys: set[tuple[int, str]] = set()
        self._ticks = 0
        self._fds = StatFds()  # members' stat files, held open between ticks
        self._last_stats: dict[int, Stat] = {}
        self._family: dict[int, Stat] | None = None  # what the last full survey found
        self._last_pid = LastPid() if LINUX else None
        self._listed_at: int | None = None  # the last pid handed out when /proc was listed

    @property
    def members(self) -> Mapping[int, Member]:
        return self._members

    def exclude(self, pid: int) -> None:
        """Never count pid as a member (the --trace tracer, re-parented to the supervisor)."""
        self._outsiders.add(pid)

    def exclude_exe(self, exe: str) -> None:
        """Never record a process running this executable (strace, whose -D start forks an
        intermediate that lives for an instant inside the family)."""
        self._tool_exes.add(os.fsencode(os.path.realpath(exe)))

    def _observed(self, m: Member, info: ProcInfo) -> None:
        """An observed record of what the sampler saw, as of when it saw it; nothing for a
        process it saw nothing of (caught exiting) or for mcpshim's own tracer."""
        if not info.exe and not info.cmdline:
            return
        if info.exe and os.path.realpath(info.exe) in self._tool_exes:
            return
        self._event("observed", {**proc_fields(info), **self._parent_exe(info),
                                 "time": m.seen or utc_now()})  # fmt: skip

    def _parent_exe(self, info: ProcInfo) -> dict[str, Any]:
        """`parent_exe`: the program its parent ran when sampled, from the parent's own
        sample (no read of its own): what tells a child that runs its parent's program by
        absolute path (node's workers, tsserver) from any other bypass of a shim, where no
        trace shows the parent's exec."""
        parent = self._members.get(info.ppid)
        if parent is None or parent.info is None or not parent.info.exe:
            return {}
        if info.parent_start is not None and parent.stat.start != info.parent_start:
            return {}  # the pid is another process's now
        return {
            "parent_exe": json_text(parent.info.exe),
            **b64_fields({"parent_exe": parent.info.exe}),
        }

    def _event(self, kind: str, payload: dict[str, Any]) -> None:
        self._emit(kind, {"session": self.session, "time": utc_now(), "boot_id": self.boot_id,
                          **payload})  # fmt: skip

    def _read_tail(self) -> None:
        if self._tail is not None:
            self.note_shim_records(r for r in self._tail.poll() if isinstance(r, ExecRecord))

    def note_shim_records(self, records: Iterable[ExecRecord]) -> None:
        for r in records:
            if r.boot_id == self.boot_id or not self.boot_id:
                self._shimmed[(r.pid, r.start)] = r.target

    # -- survey ---------------------------------------------------------------------------

    def _stats(self) -> dict[int, Stat]:
        if not LINUX:
            try:
                kids = psutil.Process(self.root).children(recursive=True)
            except psutil.Error:
                kids = []
            pids = {k.pid for k in kids} | set(self._members)
            return {p: st for p in pids if (st := read_stat(p)) is not None}
        last_pid = self._last_pid.read() if self._last_pid else None
        if (
            last_pid is not None
            and last_pid == self._listed_at
            and self._family is not None
            and self._ticks % 10
        ):
            # No process was created since /proc was last listed: no new member can exist,
            # and the members are read as they are (once a second /proc is listed anyway).
            return {p: st for p in self._family if (st := self._fds.read(p)) is not None}
        self._listed_at = last_pid
        present = set(map(int, filter(str.isdigit, os.listdir("/proc"))))
        self._outsiders &= present
        out: dict[int, Stat] = {}
        for pid in present - self._outsiders - {self.root}:
            st = self._fds.read(pid)
            if st is not None:
                out[pid] = st
        return out

    def survey(self) -> dict[int, Stat]:
        """Every live member of the family now, zombies included; updates membership.

        When every line read is the one read last time (the same pids, each line unchanged:
        StatFds hands back the same Stat), the family is the one found last time: members
        are exactly that family once tick() has run, so the walk below would find it again.
        """
        stats = self._stats()
        last = self._last_stats
        self._last_stats = stats
        if (
            self._family is not None
            and stats.keys() == last.keys()
            and all(st is last[pid] for pid, st in stats.items())
        ):
            return dict(self._family)
        kids: dict[int, list[int]] = {}
        for st in stats.values():
            kids.setdefault(st.ppid, []).append(st.pid)
        # Members stay members while they live (their parent may have been replaced by init
        # where no subreaper holds them), so their children are searched too.
        todo = [self.root] + [
            p for p, m in self._members.items() if p in stats and stats[p].start == m.stat.start
        ]
        family: dict[int, Stat] = {}
        while todo:
            pid = todo.pop()
            for kid in kids.get(pid, ()):
                if kid not in family and kid != self.root:
                    family[kid] = stats[kid]
                    todo.append(kid)
            if pid != self.root and pid not in family and pid in stats:
                family[pid] = stats[pid]
        if LINUX:
            self._outsiders |= set(stats) - set(family) - {self.root}
            self._fds.keep_only(set(family))
            self._family = dict(family)
        return family

    def close(self) -> None:
        """Let go of the stat files and the log held open (the session is over)."""
        self._fds.close()
        if self._tail is not None:
            self._tail.close()
        if self._last_pid is not None:
            self._last_pid.close()

    # -- tick -----------------------------------------------------------------------------

    def tick(self) -> None:
        self._ticks += 1
        self._read_tail()
        # Members first seen last tick are decided after this survey has caught up with an
        # exec they made since (a fork child is often first seen before its exec).
        due = [m for m in self._members.values() if m.state == "pending"]
        family = self.survey()
        fresh: list[Member] = []
        for pid, st in family.items():
            m: Member | None = self._members.get(pid)
            if m is not None and m.stat is st:
                continue  # the very line read last tick: nothing changed
            if m is not None and m.stat.start != st.start:
                if m.state == "pending":
                    self._decide(m)
                m = None  # the pid was reused
            if m is None:
                m = Member(st, None, seen=utc_now())
                self._members[pid] = m
                fresh.append(m)
                # caught inside execve, its details are half the new program's (its exe, no
                # command line yet): read once the image is laid out, next tick (below)
                if _has_image(st):
                    m.info = self._info(st)
                    m.clone = self._is_clone(m)
            elif st.image != m.stat.image and _has_image(st):
                # an exec lays out a new image; a name the process gave itself (prctl,
                # Node's process.title) changes `comm` and the command line only
                m.stat = st
                m.seen = utc_now()
                m.clone = False
                self._exec_seen(m)
            else:
                m.stat = st
        for pid in [p for p in self._members if p not in family]:
            m = self._members.pop(pid)
            if m.state == "pending":
                self._decide(m)
        for m in due:
            if m.state == "pending":
                self._decide(m)
        self._sockets(fresh)

    def _info(self, st: Stat) -> ProcInfo | None:
        parent = self._members.get(st.ppid)
        pstart = parent.stat.start if parent else None
        try:
            return (linux_info if LINUX else psutil_info)(st, pstart or start_ticks(st.ppid))
        except (psutil.Error, OSError):
            return None

    def _is_clone(self, m: Member) -> bool:
        """A fork not yet exec'd runs its parent's program with its parent's command line
        (a shell's pipeline child before it execs grep): nothing new to record."""
        parent = self._members.get(m.stat.ppid)
        if m.info is None or parent is None or parent.info is None:
            return False
        return (m.info.exe, m.info.cmdline) == (parent.info.exe, parent.info.cmdline)

    def _decide(self, m: Member) -> None:
        if m.identity in self._shimmed:
            m.state = "shimmed"
        elif m.clone:
            m.state = "observed"  # its parent's record shows the program; it exec'd nothing
        elif m.info is not None:
            m.state = "observed"
            self._observed(m, m.info)
        else:
            m.state = "observed"  # a zombie when first seen: nothing left to record

    def _exec_seen(self, m: Member) -> None:
        """The process exec'd since it was sampled: record the new image unless a shim did."""
        info = self._info(m.stat)
        if info is None:
            return
        m.info = info
        if m.state == "pending":
            return
        target = self._shimmed.get(m.identity)
        if target is None:
            # A shim writes its record before it execs its target, but the tail may not
            # have read it yet: decide next tick, after the tail has caught up.
            m.state = "pending"
            return
        if os.path.realpath(target) == os.path.realpath(info.exe):
            return
        m.state = "observed"
        self._observed(m, info)

    def finish(self) -> None:
        """Decide every pending member (the command has ended; the log is read once more)."""
        self._read_tail()
        for m in self._members.values():
            if m.state == "pending":
                self._decide(m)

    # -- sockets --------------------------------------------------------------------------

    def _sockets(self, fresh: list[Member]) -> None:
        if not fresh and self._ticks % self.socket_every:
            return
        live = [m for m in self._members.values() if m.stat.state != "Z"]
        if not LINUX:
            scan = live if self._ticks % 10 == 1 else [m for m in fresh if m.stat.state != "Z"]
            for m in scan:
                for c in psutil_conns(m.stat.pid):
                    self._socket_event(m, hash((c.laddr, c.raddr)), c)
            return
        table = socket_table()
        keys = {(ino, c.status) for ino, c in table.items()}
        scan = live if keys - self._sock_keys else [m for m in fresh if m.stat.state != "Z"]
        self._sock_keys = keys
        for m in scan:
            for ino in socket_inodes(m.stat.pid):
                conn = table.get(ino)
                if conn is not None:
                    self._socket_event(m, ino, conn)

    def _socket_event(self, m: Member, ino: int, c: Conn) -> None:
        if (ino, c.status) in m.sockets:
            return
        m.sockets.add((ino, c.status))
        # `exe`: its program, so the socket is named by it where no record of the process
        # is (a fork that exec'd nothing: Chromium's zygote children, its network service)
        exe = m.info.exe if m.info is not None else b""
        self._event("socket", {"pid": m.stat.pid, "start": m.stat.start, "proto": c.proto,
                               "laddr": c.laddr, "raddr": c.raddr, "status": c.status,
                               "exe": json_text(exe) if exe else None,
                               **b64_fields({"exe": exe})})  # fmt: skip


def _has_image(st: Stat) -> bool:
    """False for a zombie, for a process caught exiting (its memory is gone: the addresses
    read as 0 and would look like an exec with an empty command line) and for one caught
    inside execve, whose loader sets the addresses one after another: a read in between
    saw an image the next tick saw change again, and one exec was observed twice."""
    return st.state != "Z" and all(f.strip(b"0") for f in st.image)
