"""The family's socket calls, followed per process: what each connected to, tried, listened
on, accepted and sent to, with the outcome.

Sockets are followed by inode, which strace prints behind every fd (`socket:[INODE]`,
-y): the socket() that made one says its family and type (a connect on a datagram socket
is an association, nothing sent), an accept makes one like its listener's. An fd number
means nothing once closed (close is not traced: far too frequent to stop at), an inode is
the socket itself, in every process and across every dup and exec.

A blocking connect's outcome is its result. A non-blocking one (`= -1 EINPROGRESS`: curl,
node, Python's create_connection(timeout=...)) learns it from a later `getsockopt(fd,
SOL_SOCKET, SO_ERROR, [ECONNREFUSED])` on that socket, through any fd, in any process:
that settles it. A connect no getsockopt settled stays `in-progress` (the outcome was not
seen: a timeout the program enforced with poll, or a program that never asked), as do
calls strace never saw return (the process died in them, or the session ended first); a
second connect on a pending socket settles it (EISCONN: connected).

Sends are recorded when they name an address (sendto, sendmsg's msg_name: UDP, which is how
DNS lookups leave) or go out on a connected datagram socket; consecutive sends of one
process on one socket to one destination within SEND_MERGE_S of the last become one
attempt with a count. A send to port 53 is a DNS lookup: its question's name is read from
the bytes strace printed (the first DNS_KEEP bytes of each message were kept for that).
A listener bound to port 0 gets its port, and an accept that wrote back no address its
peer, from the program's own getsockname / getpeername, when it makes one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mcpshim.trace.netparse import Addr, NetCall
from mcpshim.trace.parse import Event

__all__ = [
    "NAME_SERVICE_SOCKETS",
    "SEND_MERGE_S",
    "NetAttempt",
    "dns_question",
    "follow",
    "outcome_of",
]

SEND_MERGE_S = 1.0
MAX_QUERIES = 32  # names kept on one merged send attempt; more start a new attempt
#: glibc's name service cache: every lookup (hosts, users) first tries it
NAME_SERVICE_SOCKETS = (b"/var/run/nscd/socket", b"/run/nscd/socket")
_QTYPES = {1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 12: "PTR", 15: "MX", 16: "TXT", 28: "AAAA",
           33: "SRV", 64: "SVCB", 65: "HTTPS", 255: "ANY"}  # fmt: skip
_OUTCOMES = {
    "ECONNREFUSED": "refused",
    "ENETUNREACH": "unreachable",
    "EHOSTUNREACH": "unreachable",
    "ENETDOWN": "unreachable",
    "EHOSTDOWN": "unreachable",
    "ETIMEDOUT": "timed-out",
    "EACCES": "denied",  # a Landlock rule, a socket file's mode
    "EPERM": "denied",  # a firewall rule, seccomp
    "ENOENT": "absent",  # no socket at that path
    "EINPROGRESS": "in-progress",
    "EINTR": "in-progress",  # a blocking connect goes on in the kernel
    "?": "in-progress",
}


@dataclass(frozen=True)
class NetAttempt:
    """One socket call of one process (a thread's: `tid`) that crossed a boundary."""

    time: float
    pid: int
    tid: int
    call: str  # connect | listen | bind | accept | send
    family: str  # inet | inet6 | unix | another AF_ name, lower-cased
    transport: str | None  # tcp | udp | stream | dgram | seqpacket | ... (None: not printed)
    address: bytes | None  # connect/send/accept: the other end; listen/bind: its own
    port: int | None
    outcome: str  # see outcome_of
    errno: str = ""
    abstract: bool = False
    local_address: bytes | None = None  # accept: the address it was accepted on
    local_port: int | None = None
    nonblocking: bool = False  # EINPROGRESS first: the outcome is a getsockopt's
    settled: float | None = None  # when that outcome was seen
    queries: tuple[tuple[bytes, str], ...] = ()  # DNS: (name, type) of each question
    count: int = 1  # sends merged into this one
    last_time: float | None = None  # the last of them
    socket: int | None = None  # the socket's inode: the same in every record of one socket

    @property
    def purpose(self) -> str | None:
        """dns: port 53; name-service: glibc's nscd socket (its every lookup tries it)."""
        if self.port == 53 and self.family in ("inet", "inet6"):
            return "dns"
        if self.family == "unix" and self.address in NAME_SERVICE_SOCKETS:
            return "name-service"
        return None


def outcome_of(call: str, result: str, dgram: bool = False) -> tuple[str, str]:
    """(outcome, errno) of a call's result: connected (associated, for a datagram socket:
    nothing was sent), listening, bound, accepted, sent; refused, unreachable, timed-out,
    denied, absent, in-progress, failed (errno says why)."""
    if result in ("ok", "EISCONN"):
        ok = {"connect": "associated" if dgram else "connected", "listen": "listening",
              "bind": "bound", "accept": "accepted", "send": "sent"}  # fmt: skip
        return ok[call], ""
    err = "" if result == "?" else result
    return _OUTCOMES.get(result, "failed"), err


def dns_question(msg: bytes) -> tuple[bytes, str] | None:
    """The first question of a DNS query message: (name, type), or None if it is none."""
    if len(msg) < 17 or msg[2] & 0x80 or not int.from_bytes(msg[4:6], "big"):
        return None  # too short, a response, or no question
    pos, labels = 12, []
    while pos < len(msg) and msg[pos]:
        n = msg[pos]
        if n & 0xC0 or pos + 1 + n > len(msg):
            return None  # a pointer (queries have none) or a cut label
        labels.append(msg[pos + 1 : pos + 1 + n])
        pos += 1 + n
    if pos + 3 > len(msg) or pos > 12 + 255:
        return None
    qtype = int.from_bytes(msg[pos + 1 : pos + 3], "big")
    return b".".join(labels), _QTYPES.get(qtype, str(qtype))


_TRANSPORTS = {("inet", "stream"): "tcp", ("inet", "dgram"): "udp", ("unix", "stream"): "stream",
               ("unix", "dgram"): "dgram"}  # fmt: skip


@dataclass
class _Socket:
    """What the trace showed of one socket (by its inode): made by socket() or accept."""

    family: str = ""
    type: str = ""  # stream | dgram | seqpacket | raw | ...; "" when its making was not seen
    bound: Addr | None = None
    listening: Addr | None = None
    peer: Addr | None = None  # the last destination connect gave it
    pending: int | None = None  # the index of its connect still in progress
    unnamed: int | None = None  # the index of its listen or accept whose port is not known

    @property
    def transport(self) -> str | None:
        fam = "inet" if self.family in ("inet", "inet6") else self.family
        if (fam, self.type) in _TRANSPORTS:
            return _TRANSPORTS[(fam, self.type)]
        return self.type or None

    @property
    def dgram(self) -> bool:
        return self.type == "dgram"


class _Follower:
    def __init__(self) -> None:
        self.out: list[NetAttempt] = []
        self.socks: dict[int, _Socket] = {}
        self.fds: dict[tuple[int, int], int] = {}  # the inode each fd last showed
        self.last_send: dict[int, int] = {}  # the latest send attempt of each socket

    def add(self, t: float, pid: int, tid: int, c: NetCall) -> None:
        if c.call == "socket":
            if c.inode is not None:
                self.socks[c.inode] = _Socket(c.family, c.type)
                self.fds[(pid, c.fd)] = c.inode
            return
        inode = c.inode if c.inode is not None else self.fds.get((pid, c.fd))
        if inode is None:
            inode = -(pid << 20 | c.fd)  # strace named no socket: this fd of this process
        else:
            self.fds[(pid, c.fd)] = inode
        sock = self.socks.setdefault(inode, _Socket())
        if sock.family == "netlink":
            return
        getattr(self, "_" + c.call)(t, pid, tid, c, inode, sock)

    def _attempt(self, t: float, pid: int, tid: int, c: NetCall, inode: int, sock: _Socket,
                 end: Addr | None, result: str, **kw: Any) -> int:  # fmt: skip
        outcome, errno = outcome_of(c.call, result, sock.dgram)
        self.out.append(NetAttempt(
            t, pid, tid, c.call, end.family if end else sock.family or "unknown",
            sock.transport, end.address if end else None, end.port if end else None, outcome,
            errno, bool(end and end.abstract), socket=inode if inode >= 0 else None, **kw,
        ))  # fmt: skip
        return len(self.out) - 1

    def _connect(self, t: float, pid: int, tid: int, c: NetCall, inode: int, s: _Socket) -> None:
        a = c.addr
        if a is None or a.family in ("unspec", "netlink"):
            return  # AF_UNSPEC dissolves an association; netlink is the kernel
        if s.pending is not None:
            prev = self.out[s.pending]
            if (prev.address, prev.port) == (a.address, a.port):
                if c.result not in ("EALREADY", "EINPROGRESS", "EINTR"):
                    self._settle(s, t, c.result)  # connect again: the pending one's outcome
                return
            s.pending = None  # another destination: that one's outcome stays unseen
        if not s.family:
            s.family = a.family
        i = self._attempt(t, pid, tid, c, inode, s, a, c.result,
                          nonblocking=c.result == "EINPROGRESS")  # fmt: skip
        if c.result in ("EINPROGRESS", "EINTR"):
            s.pending = i
        s.peer = a if c.result in ("ok", "EINPROGRESS", "EINTR") else s.peer

    def _settle(self, s: _Socket, t: float, result: str) -> None:
        assert s.pending is not None
        a = self.out[s.pending]
        outcome, errno = outcome_of("connect", result, s.dgram)
        self.out[s.pending] = dataclasses.replace(a, outcome=outcome, errno=errno, settled=t)
        s.pending = None

    def _so_error(self, t: float, _pid: int, _tid: int, c: NetCall, _i: int, s: _Socket) -> None:
        if s.pending is not None:  # any fd of any process: the socket is the same
            self._settle(s, t, "ok" if c.so_error == "0" else c.so_error)

    def _bind(self, t: float, pid: int, tid: int, c: NetCall, inode: int, s: _Socket) -> None:
        a = c.addr
        if a is None or a.family not in ("inet", "inet6", "unix"):
            return
        s.family = s.family or a.family
        if c.result == "ok":
            s.bound = a
        named = bool(a.port) or (a.family == "unix" and bool(a.address))
        denied = c.result in ("EACCES", "EPERM")  # a blocked attempt to listen there
        if (s.dgram and named) or denied:
            self._attempt(t, pid, tid, c, inode, s, a, c.result)

    def _listen(self, t: float, pid: int, tid: int, c: NetCall, inode: int, s: _Socket) -> None:
        s.listening = s.bound if c.result == "ok" else None
        i = self._attempt(t, pid, tid, c, inode, s, s.bound, c.result)
        if c.result == "ok" and not (s.bound and (s.bound.port or s.bound.family == "unix")):
            s.unnamed = i  # bound to port 0 (or not at all): the kernel chose the port

    def _sockname(self, *a: Any) -> None:
        self._name("listen", *a)

    def _peername(self, *a: Any) -> None:
        self._name("accept", *a)

    def _name(self, call: str, _t: float, _p: int, _d: int, c: NetCall, _i: int,
              s: _Socket) -> None:  # fmt: skip
        """A listener's own port (getsockname), an accepted socket's peer (getpeername)."""
        i = s.unnamed
        a = c.addr
        if i is None or a is None or a.family not in ("inet", "inet6") or self.out[i].call != call:
            return
        self.out[i] = dataclasses.replace(self.out[i], address=a.address, port=a.port)
        s.unnamed = None
        if call == "listen":
            s.listening = s.bound = a

    def _accept(self, t: float, pid: int, tid: int, c: NetCall, inode: int, s: _Socket) -> None:
        if c.result != "ok":
            return  # EAGAIN ends every non-blocking accept loop: nothing came in
        local = s.listening or s.bound
        peer = c.addr if c.addr is not None and c.addr.address else None  # unix: unnamed
        if peer is None and s.family:
            peer = Addr(s.family, None)
        i = self._attempt(t, pid, tid, c, inode, s, peer, c.result,
                          local_address=local.address if local else None,
                          local_port=local.port if local else None)  # fmt: skip
        if c.new_inode is not None:
            new = self.socks[c.new_inode] = _Socket(s.family, s.type, local)
            new.unnamed = i if peer is None or peer.address is None else None
            self.fds[(pid, c.new_fd)] = c.new_inode

    def _send(self, t: float, pid: int, tid: int, c: NetCall, inode: int, s: _Socket) -> None:
        a = c.addr
        if a is None and (s.dgram or (s.peer is not None and s.peer.port == 53)):
            a = s.peer  # a connected datagram socket (or DNS over TCP): its connect's peer
        if a is None or a.family in ("netlink", "unspec"):
            return  # a stream socket's send: its connect is on record
        queries: tuple[tuple[bytes, str], ...] = ()
        if a.port == 53:
            queries = tuple(q for m in c.payloads if (q := _question(m, s)) is not None)
        last = self.last_send.get(inode)
        if last is not None:
            prev = self.out[last]
            outcome = outcome_of("send", c.result)[0]
            merged = tuple(dict.fromkeys(prev.queries + queries))
            if (t - (prev.last_time or prev.time) <= SEND_MERGE_S and prev.pid == pid
                    and (prev.address, prev.port, prev.outcome) == (a.address, a.port, outcome)
                    and len(merged) <= MAX_QUERIES):  # fmt: skip
                self.out[last] = dataclasses.replace(prev, count=prev.count + 1, last_time=t,
                                                     queries=merged)  # fmt: skip
                return
        self.last_send[inode] = self._attempt(t, pid, tid, c, inode, s, a, c.result,
                                              queries=tuple(dict.fromkeys(queries)))  # fmt: skip


def _question(msg: bytes, sock: _Socket) -> tuple[bytes, str] | None:
    if sock.type == "stream":
        msg = msg[2:]  # DNS over TCP: a two-byte length first
    return dns_question(msg)


def follow(events: Iterable[tuple[int, Event]]) -> list[NetAttempt]:
    """The attempts of the family's socket calls, from (process id, its event) in time
    order (build_trace's merge)."""
    f = _Follower()
    for pid, ev in events:
        if ev.net is not None:
            f.add(ev.time, pid, ev.tid, ev.net)
    return f.out
