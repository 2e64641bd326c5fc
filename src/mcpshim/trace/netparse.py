"""strace's lines for the family's socket calls, parsed (`NetCall`), and the cut that keeps
what a process sends out of everything stored (`shrink_send`).

Addresses are strace's own printing, never a name lookup: the address argument as
`{sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("...")}` (AF_INET6 through
`inet_pton(AF_INET6, "...", &sin6_addr)`, AF_UNIX as `sun_path="..."`, `@"..."` when
abstract; getsockname/getpeername say which port a listener bound to port 0 got and who
an accept with no address took). With `-y` each fd shows what it names, `socket:[INODE]`
for a socket: the socket's identity across dup'd fds, forks and execs, which trace.net
follows from the `socket()` that made it. (`-yy` would also print each socket's
addresses, but strace asks the kernel's socket tables for them at every printed call
while the caller waits: 1.6 ms a call here, against 11 us for -y.) Every string is `\\xHH`
escapes (-xx): a socket path or a buffer holds any bytes, and no quote or bracket inside
one is structure.

A send's bytes can hold anything (an HTTP request and its token): `shrink_send` empties
every buffer of a sendto / sendmsg / sendmmsg line before the line is stored, except the
first DNS_KEEP bytes of a send to port 53 (a DNS query: its question is the queried name),
told by the address the line names or, on a connected socket, by the connect to port 53
the same stream showed for that socket earlier (`Connected`).

Most sends become no fact at all: a send that names no address is one only on a socket a
connect gave a peer (trace.net: a connected datagram socket's, DNS over TCP), so the sends
of a socketpair (Chromium's IPC: 4,800 a browser session), of a connected stream that is
not DNS and of a netlink socket are dropped before they are stored or parsed
(`Connected.keeps`). strace still stops the sender at each: its seccomp filter chooses by
the call's number alone, and a DNS query on a connected UDP socket is the same `sendto(fd,
buf, len, 0, NULL, 0)` as an IPC message (docs/design.md, "Tracing").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "DNS_KEEP",
    "NET_CALLS",
    "Addr",
    "Connected",
    "NetCall",
    "addr_at",
    "call_only",
    "parse_net",
    "shrink_send",
]

#: bytes of a send to port 53 kept: a DNS header (12), the longest name (255), type, class
#: and TCP's length prefix fit
DNS_KEEP = 300
NET_CALLS = (b"socket(", b"connect(", b"bind(", b"listen(", b"accept(", b"accept4(",
             b"sendto(", b"sendmsg(", b"sendmmsg(", b"getsockopt(", b"getsockname(",
             b"getpeername(")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Addr:
    """One end of a socket: an IP literal and port, or a Unix socket path (b"": unnamed)."""

    family: str  # inet | inet6 | unix | strace's AF_ name lower-cased (packet, vsock, ...)
    address: bytes | None
    port: int | None = None
    abstract: bool = False  # a Linux abstract Unix name (no file; `@` in strace)


@dataclass(frozen=True, slots=True)
class NetCall:
    call: str  # socket connect bind listen accept send so_error sockname peername
    fd: int  # socket: the fd it returned
    inode: int | None  # the socket behind fd (None: strace named no socket)
    addr: Addr | None  # the address argument (accept: the peer it wrote back)
    result: str  # "ok", an errno name, or "?" when the call never returned
    new_inode: int | None = None  # accept: the socket it returned
    new_fd: int = -1  # accept: its fd
    so_error: str = ""  # so_error: "0" or the errno name the socket held
    payloads: tuple[bytes, ...] = ()  # a send to port 53: each message's first bytes
    family: str = ""  # socket: inet | inet6 | unix | ... (the AF_ name, lower-cased)
    type: str = ""  # socket: stream | dgram | seqpacket | raw | ...


_HEX = rb"(?:\\x[0-9a-f]{2})*"
_FD = re.compile(rb"(\d+)(?:<(" + _HEX + rb")>)?")
_INODE = re.compile(rb"socket:\[(\d+)\]\Z")
_SA_INET = re.compile(rb'\{sa_family=AF_INET, sin_port=htons\((\d+)\), sin_addr=inet_addr\("('
                      + _HEX + rb')"\)\}')  # fmt: skip
_SA_INET6 = re.compile(rb"\{sa_family=AF_INET6, sin6_port=htons\((\d+)\), sin6_flowinfo=[^,]*, "
                       rb'inet_pton\(AF_INET6, "(' + _HEX + rb')", &sin6_addr\)')  # fmt: skip
_SA_UNIX = re.compile(rb'\{sa_family=AF_UNIX(?:, sun_path=(@?)"(' + _HEX + rb')"(\.\.\.)?)?\}')
_SA_OTHER = re.compile(rb"\{sa_family=(?:AF_)?([A-Za-z0-9_]+)")
_RET = re.compile(rb"\) += (-?\d+|\?)(?:<(" + _HEX + rb")>)?(?: ([A-Z][A-Z0-9_]*))?")
_SOCKET = re.compile(rb"(?:AF_|PF_)?([A-Z0-9_]+), (?:SOCK_)?([A-Z0-9_]+)")
_SO_ERROR = re.compile(rb"SOL_SOCKET, SO_ERROR, \[([A-Z0-9_]+)\]")
_STRING = re.compile(rb'"(' + _HEX + rb')"')
_IOV = re.compile(rb'iov_base="(' + _HEX + rb')"')
_SEND_CALL = re.compile(rb"\d+ +\d+\.\d+ (sendto|sendmsg|sendmmsg)\((\d+)(<" + _HEX + rb">)?")
_CONNECT = re.compile(rb"\d+ +\d+\.\d+ connect\(\d+(<" + _HEX + rb">)?, ")
_SOCKET_DGRAM = re.compile(rb"\d+ +\d+\.\d+ socket\([A-Z0-9_]+, SOCK_DGRAM\b[^)]*\) += \d+(<"
                           + _HEX + rb">)")  # fmt: skip
_PORT_53 = re.compile(rb"[^)]*sin6?_port=htons\(53\)")
_SOCKET_ANN = b"<" + b"".join(b"\\x%02x" % c for c in b"socket:[")  # `<socket:[`, hex escaped
#: how far from its line's end (sendto) or start (sendmsg) strace prints a send's address:
#: the call's other arguments and the result, and the longest address, a Unix path of 108
#: bytes in hex (432), hold in it
_ADDR_SPAN = 2048


def _unhex(s: bytes) -> bytes:
    return bytes.fromhex(s.replace(b"\\x", b"").decode("ascii"))


def _inode(ann: bytes | None) -> int | None:
    """The inode of a `socket:[INODE]` annotation (hex escaped); None for anything else."""
    if ann is None:
        return None
    m = _INODE.match(_unhex(ann))
    return int(m.group(1)) if m else None


def addr_at(line: bytes, pos: int) -> Addr | None:
    """The sockaddr strace printed at pos (None: NULL, an address it could not read)."""
    if not line.startswith(b"{sa_family=", pos):
        return None
    if m := _SA_INET.match(line, pos):
        return Addr("inet", _unhex(m.group(2)), int(m.group(1)))
    if m := _SA_INET6.match(line, pos):
        return Addr("inet6", _unhex(m.group(2)), int(m.group(1)))
    if m := _SA_UNIX.match(line, pos):
        path = _unhex(m.group(2)) if m.group(2) is not None else b""
        return Addr("unix", path, None, m.group(1) == b"@")
    m = _SA_OTHER.match(line, pos)
    return Addr(m.group(1).decode("ascii").lower(), None) if m else None


def _outcome(line: bytes) -> tuple[str, int, int | None]:
    """("ok" | errno | "?", the value, the inode of the socket it returned)."""
    if line.endswith(b"<unfinished ...>"):
        return "?", -1, None
    at = line.rfind(b") = ")
    m = _RET.match(line, at) if at >= 0 else None
    if m is None or m.group(1) == b"?":
        return "?", -1, None
    if int(m.group(1)) < 0:
        return (m.group(3) or b"EUNKNOWN").decode("ascii"), -1, None
    return "ok", int(m.group(1)), _inode(m.group(2))


def parse_net(rest: bytes) -> NetCall | None:
    """One socket call's line (after its timestamp), or None when it is none we use."""
    open_ = rest.find(b"(")
    name = rest[:open_]
    result, value, new = _outcome(rest)
    if name == b"socket":
        m = _SOCKET.match(rest, open_ + 1)
        if m is None or result != "ok":
            return None
        fam, kind = (g.decode("ascii").lower() for g in m.groups())
        return NetCall("socket", value, new, None, result, family=fam, type=kind)
    fd = _FD.match(rest, open_ + 1)
    if fd is None:
        return None
    n, inode, pos = int(fd.group(1)), _inode(fd.group(2)), fd.end() + 2
    if name == b"getsockopt":
        m = _SO_ERROR.match(rest, pos)
        if m is None or result != "ok":
            return None
        return NetCall("so_error", n, inode, None, result, so_error=m.group(1).decode("ascii"))
    if name in (b"connect", b"bind"):
        return NetCall(name.decode(), n, inode, addr_at(rest, pos), result)
    if name in (b"getsockname", b"getpeername"):
        call = "sockname" if name == b"getsockname" else "peername"
        return NetCall(call, n, inode, addr_at(rest, pos), result) if result == "ok" else None
    if name == b"listen":
        return NetCall("listen", n, inode, None, result)
    if name in (b"accept", b"accept4"):
        return NetCall("accept", n, inode, addr_at(rest, pos), result, new, value)
    return _send(name, n, inode, rest, pos, result)


def _send(name: bytes, fd: int, inode: int | None, rest: bytes, pos: int, result: str) -> NetCall:
    """sendto's address follows its buffer; sendmsg's is msg_name (sendmmsg: the first).
    Bytes are kept (payloads) wherever the line still has them: shrink_send left only a
    DNS query's; trace.net reads them for a send to port 53 only."""
    addr: Addr | None = None
    key = b", {sa_family=" if name == b"sendto" else b"msg_name={sa_family="
    at = rest.find(key, pos)
    if at >= 0:
        addr = addr_at(rest, rest.index(b"{", at))
    payloads: tuple[bytes, ...]
    if name == b"sendto":
        m = _STRING.match(rest, pos)
        payloads = (_unhex(m.group(1)),) if m and m.group(1) else ()
    else:
        payloads = tuple(_unhex(m.group(1)) for m in _IOV.finditer(rest, pos) if m.group(1))
    return NetCall("send", fd, inode, addr, result, payloads=payloads)


# ---- before a line is stored ---------------------------------------------------------------


class Connected:
    """What a stream of lines showed of the sockets a send that names no address can
    become a fact on (trace.net): connected, and a datagram socket (its socket() said
    SOCK_DGRAM) or connected to port 53 (DNS over TCP), by their fd annotation
    (`socket:[INODE]`: unique while the socket lives). `keeps` says whether a send's line
    can become a fact; a send on a socket connected to port 53 keeps a query's first bytes
    (`dns`). Past LIMIT sockets, or after a connect whose socket strace did not name, every
    send is kept: none is lost to the cut."""

    LIMIT = 1 << 16
    DNS_LIMIT = 4096

    def __init__(self) -> None:
        self._dns: dict[bytes, None] = {}
        self._dgram: set[bytes] = set()  # made by socket(..., SOCK_DGRAM, ...)
        self._peers: set[bytes] = set()  # datagram sockets a connect gave a peer
        self.keep_all = False

    def note_socket(self, line: bytes) -> None:
        m = _SOCKET_DGRAM.match(line)
        if m is not None and not self.keep_all:
            self._dgram.add(m.group(1))
            self._limit(self._dgram)

    def note(self, line: bytes) -> None:
        m = _CONNECT.match(line)
        if m is None:
            return
        ann = m.group(1)
        if ann is None or not ann.startswith(_SOCKET_ANN):
            self.keep_all = True  # its socket is known by fd only (trace.net): keep all
        elif not self.keep_all and ann in self._dgram:
            self._peers.add(ann)
            self._limit(self._peers)
        if ann is not None and _PORT_53.match(line, m.end()):
            self._dns[ann] = None
            if len(self._dns) > self.DNS_LIMIT:  # the oldest: long closed, most likely
                del self._dns[next(iter(self._dns))]

    def _limit(self, seen: set[bytes]) -> None:
        if len(seen) > self.LIMIT:
            self.keep_all = True
            self._dgram, self._peers = set(), set()

    def dns(self, ann: bytes | None) -> bool:
        return ann is not None and ann in self._dns

    def keeps(self, line: bytes, ann: bytes | None, call: bytes = b"") -> bool:
        """Whether a send's line (its fd's annotation `ann`) can become a fact: it names an
        address (sendto's, a msg_name), goes out on a connected datagram socket or one
        connected to port 53, or its socket is not known. The address is looked for where
        strace prints it: after sendto's buffer (its line's last bytes), before sendmsg's
        (its first): not across a 64 KiB buffer's 256 KiB of hex."""
        if self.keep_all or ann is None or ann in self._peers or ann in self._dns:
            return True
        if not ann.startswith(_SOCKET_ANN):
            return True
        if call == b"sendto":
            return line.find(b"sa_family=", max(0, len(line) - _ADDR_SPAN)) >= 0
        if call == b"sendmsg":
            return line.find(b"sa_family=", 0, _ADDR_SPAN) >= 0
        return line.find(b"sa_family=") >= 0


def _kept(body: bytes, keep: int) -> bytes:
    """A buffer's `\\xHH` body cut to `keep` bytes; `...` says bytes were left out."""
    return b'"' + body[: keep * 4] + b'"' + (b"..." if len(body) > keep * 4 else b"")


def call_only(line: bytes, end: int) -> bytes:
    """The call's name and its result only, for a line whose shape is not understood."""
    tail = b" <unfinished ...>" if line.endswith(b"<unfinished ...>") else b""
    r = line.rfind(b") = ")
    if r >= 0 and not tail:
        tail = line[r:]
    return line[:end] + b"?" + (tail if tail.startswith(b")") else b")" + tail)


def shrink_send(line: bytes, known: Connected | None = None) -> bytes | None:
    """A raw sendto / sendmsg / sendmmsg line with every buffer emptied (`""`), or cut to
    DNS_KEEP bytes on a send to port 53; None for a send that can become no fact (`known`:
    the connects the stream showed so far, Connected.keeps); a line of any other call comes
    back as it is. A buffer strace printed as a structure (a netlink message) or a shape
    not understood leaves only the call and its result: no byte a process sent is stored
    otherwise. Buffers are skipped by their closing quote (memchr), never scanned: a 64 KiB
    send is a 256 KiB line."""
    m = _SEND_CALL.match(line)
    if m is None:
        return line
    if known is not None and not known.keeps(line, m.group(3), m.group(1)):
        return None
    on53 = known is not None and known.dns(m.group(3))
    cut = call_only(line, line.index(b"(", m.start(1)) + 1)
    if m.group(1) == b"sendto":
        pos = m.end() + 2
        close = line.find(b'"', pos + 1) if line.startswith(b', "', m.end()) else -1
        if close < 0:
            return cut
        stop = close + 4 if line.startswith(b"...", close + 1) else close + 1
        keep = DNS_KEEP if on53 or b"_port=htons(53)" in line[stop:] else 0
        return line[:pos] + _kept(line[pos + 1 : close], keep) + line[stop:]
    out, last, keep = [], 0, -1
    begin = line.find(b"iov_base=", m.end())
    while begin >= 0:
        begin += len(b"iov_base=")
        if keep < 0:  # msg_name comes before the first buffer
            keep = DNS_KEEP if on53 or b"_port=htons(53)" in line[m.end() : begin] else 0
        close = line.find(b'"', begin + 1) if line.startswith(b'"', begin) else -1
        if close < 0:
            return cut  # a decoded structure, or a shape not understood
        stop = close + 4 if line.startswith(b"...", close + 1) else close + 1
        out += [line[last:begin], _kept(line[begin + 1 : close], keep)]
        last = stop
        begin = line.find(b"iov_base=", stop)
    return b"".join(out) + line[last:]
