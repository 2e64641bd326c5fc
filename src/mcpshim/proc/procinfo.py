"""One process read from the OS: identity (stat), evidence (ProcInfo) and inet sockets.

On Linux everything comes from /proc as exact bytes (a command line that is not UTF-8
stays what it was); elsewhere from psutil. Environment *values* are never kept: only the
names of credential-like variables, which is what the session records may hold.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from mcpshim.base.display import b64_fields, json_text
from mcpshim.log.execlog import CLK_TCK
from mcpshim.log.logview import argv_fields
from mcpshim.log.redact import credential_env_names

__all__ = [
    "LINUX",
    "Conn",
    "ProcInfo",
    "Stat",
    "cpu_seconds",
    "linux_info",
    "parse_stat",
    "proc_fields",
    "proc_info",
    "psutil_conns",
    "psutil_info",
    "read_stat",
    "socket_inodes",
    "socket_table",
    "start_ticks",
]

LINUX = sys.platform.startswith("linux") and os.path.isdir("/proc/self")


@dataclass(frozen=True, slots=True)
class Stat:
    pid: int
    comm: bytes
    state: str
    ppid: int
    pgid: int
    start: int | None
    # Addresses the kernel lays out anew at every exec (code, stack, argv; randomised by
    # ASLR): a change means a new image even when the name did not change (sh -> sh).
    image: tuple[bytes, ...] = ()
    # CPU time used so far, user and system, in clock ticks (fields 14 and 15). Left out
    # of equality: a Stat says which process and image, and a running one ticks.
    cpu: int = field(default=0, compare=False)

    @property
    def gone(self) -> bool:
        """A zombie (exited, not yet reaped) or dead: nothing of it runs any more."""
        return self.state in ("Z", "X")


def _read(path: str) -> bytes | None:
    """A whole small file in as few syscalls as Python allows (this runs 10 times a second)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _psutil_start(p: psutil.Process) -> int | None:
    try:
        return round((p.create_time() - psutil.boot_time()) * CLK_TCK)
    except (psutil.Error, OSError):
        return None


def parse_stat(pid: int, data: bytes) -> Stat | None:
    """A /proc/PID/stat line; None when it is not one (cut short, or empty: the process is
    gone). The one parser of that line: the name may hold blanks and parentheses, so the
    fields are counted after its last `)`."""
    close = data.rfind(b")")
    f = data[close + 2 :].split()
    if close < 0 or len(f) < 20:
        return None
    try:
        return Stat(pid, data[data.find(b"(") + 1 : close], f[0].decode(), int(f[1]), int(f[2]),
                    int(f[19]), (*f[23:26], *f[45:47]), int(f[11]) + int(f[12]))  # fmt: skip
    except ValueError:
        return None


def read_stat(pid: int) -> Stat | None:
    """One process's identity and parent; None when it is gone."""
    if LINUX:
        try:
            fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            data = os.read(fd, 4096)  # one read: a stat line is well under 1 KiB
        except OSError:
            return None
        finally:
            os.close(fd)
        return parse_stat(pid, data)
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            cpu = p.cpu_times()
            return Stat(pid, p.name().encode(), p.status()[:1].upper(), p.ppid(), os.getpgid(pid),
                        _psutil_start(p), (), round((cpu.user + cpu.system) * CLK_TCK))  # fmt: skip
    except (psutil.Error, OSError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """The CPU time a process has used so far, user and system; None once it is reaped."""
    st = read_stat(pid)
    return st.cpu / CLK_TCK if st else None


def start_ticks(pid: int) -> int | None:
    st = read_stat(pid)
    return st.start if st else None


@dataclass(frozen=True)
class ProcInfo:
    """Evidence about one process, read while it lived. Bytes are exactly the OS's."""

    pid: int
    ppid: int
    start: int | None
    parent_start: int | None
    exe: bytes
    cmdline: tuple[bytes, ...]
    cwd: bytes
    uid: int | None
    env_names: tuple[str, ...]  # credential-like names only; never values
    #: the PATH it was started with (the only value read from its environment); None when
    #: it had none, `path_known` False when the environment could not be read
    path: bytes | None = None
    path_known: bool = False


def _readlink(path: str) -> bytes:
    try:
        return os.readlink(path.encode())
    except OSError:
        return b""


def linux_info(st: Stat, parent_start: int | None) -> ProcInfo:
    base = f"/proc/{st.pid}"
    raw = _read(base + "/cmdline") or b""
    cmdline = tuple(raw[:-1].split(b"\0")) if raw.endswith(b"\0") else (raw,) if raw else ()
    uid = None
    for line in (_read(base + "/status") or b"").splitlines():
        if line.startswith(b"Uid:"):
            with contextlib.suppress(IndexError, ValueError):
                uid = int(line.split()[1])
            break
    env = _read(base + "/environ")
    items = (env or b"").split(b"\0")
    names = (item.split(b"=", 1)[0].decode("utf-8", "replace") for item in items)
    path = next((i[5:] for i in items if i.startswith(b"PATH=")), None)
    return ProcInfo(
        st.pid, st.ppid, st.start, parent_start, _readlink(base + "/exe"), cmdline,
        _readlink(base + "/cwd"), uid, credential_env_names(n for n in names if n),
        path, env is not None,
    )  # fmt: skip


def psutil_info(st: Stat, parent_start: int | None) -> ProcInfo:
    p = psutil.Process(st.pid)

    def get(fn: Callable[[], Any], default: Any) -> Any:
        try:
            return fn()
        except (psutil.Error, OSError):
            return default

    uids = get(p.uids, None)
    return ProcInfo(
        st.pid, st.ppid, st.start, parent_start, os.fsencode(get(p.exe, "")),
        tuple(os.fsencode(a) for a in get(p.cmdline, [])), os.fsencode(get(p.cwd, "")),
        uids.real if uids else None, credential_env_names(get(p.environ, {}).keys()),
    )  # fmt: skip


def proc_info(pid: int, parent_start: int | None = None) -> ProcInfo | None:
    st = read_stat(pid)
    if st is None:
        return None
    if parent_start is None:
        parent_start = start_ticks(st.ppid)
    return linux_info(st, parent_start) if LINUX else psutil_info(st, parent_start)


def proc_fields(info: ProcInfo) -> dict[str, Any]:
    """The process part of observed and survivor payloads (argv redacted, bytes exact)."""
    out: dict[str, Any] = {
        "pid": info.pid,
        "ppid": info.ppid,
        "start": info.start,
        "parent_start": info.parent_start,
        "exe": json_text(info.exe),
        "cwd": json_text(info.cwd),
        "uid": info.uid,
        "credential_env": list(info.env_names),
    }
    if info.path_known:
        out["path"] = json_text(info.path) if info.path is not None else None
        out.update(b64_fields({"path": info.path or b""}))
    out.update(argv_fields("cmdline", info.cmdline))
    out.update(b64_fields({"exe": info.exe, "cwd": info.cwd}))
    return out


# ---- sockets ----------------------------------------------------------------------------

_TCP_STATES = {"0A": "LISTEN", "01": "ESTABLISHED"}
_UDP_STATES = {"07": "LISTEN", "01": "ESTABLISHED"}  # bound and receiving / connected


@dataclass(frozen=True, slots=True)
class Conn:
    proto: str
    laddr: str
    raddr: str | None
    status: str


def _addr(text: str, v6: bool) -> tuple[str, int]:
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    # The kernel prints each 32-bit word in host order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.IPv6Address(words) if v6 else ipaddress.IPv4Address(words)
    return (f"[{ip}]" if v6 else str(ip)), int(port, 16)


def _proc_net_table() -> dict[int, Conn]:
    """The same table from /proc/net/* (slower: the kernel formats every hash bucket)."""
    out: dict[int, Conn] = {}
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        states = _TCP_STATES if proto.startswith("tcp") else _UDP_STATES
        for line in (_read(f"/proc/self/net/{proto}") or b"").decode().splitlines()[1:]:
            f = line.split()
            if len(f) < 10 or f[3] not in states or f[9] == "0":
                continue
            v6 = proto.endswith("6")
            lhost, lport = _addr(f[1], v6)
            if states is _UDP_STATES and f[3] == "07" and lport == 0:
                continue
            rhost, rport = _addr(f[2], v6)
            raddr = None if rport == 0 else f"{rhost}:{rport}"
            out[int(f[9])] = Conn(proto, f"{lhost}:{lport}", raddr, states[f[3]])
    return out


# sock_diag (netlink): the kernel filters by state, so a dump costs tens of microseconds
# where reading /proc/net/tcp costs milliseconds on a machine with large hash tables.
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST_DUMP = 0x301
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_TCP_LISTEN, _TCP_ESTABLISHED, _TCP_CLOSE = 10, 1, 7
_HDR = struct.Struct("=IHHII")
_REQ = struct.Struct("=BBBBI48x")
_MSG = struct.Struct("=BBBB2H16s16s8x20xI")  # family, state, timer, retrans, id, ..., inode


def _ip(family: int, raw: bytes) -> str:
    if family == socket.AF_INET6:
        return f"[{ipaddress.IPv6Address(raw)}]"
    return str(ipaddress.IPv4Address(raw[:4]))


def _diag_dump(sock: socket.socket, family: int, proto: int, out: dict[int, Conn]) -> None:
    states = (1 << _TCP_LISTEN) | (1 << _TCP_ESTABLISHED)
    if proto == socket.IPPROTO_UDP:
        states |= 1 << _TCP_CLOSE  # an unconnected UDP socket: bound, receiving
    req = _REQ.pack(family, proto, 0, 0, states)
    sock.send(
        _HDR.pack(_HDR.size + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST_DUMP, 1, 0) + req
    )
    name = ("tcp" if proto == socket.IPPROTO_TCP else "udp") + (
        "6" if family == socket.AF_INET6 else ""
    )
    while True:
        data = sock.recv(1 << 16)
        off = 0
        while off + _HDR.size <= len(data):
            length, kind = _HDR.unpack_from(data, off)[:2]
            if kind == _NLMSG_DONE:
                return
            if kind == _NLMSG_ERROR or length < _HDR.size:
                raise OSError("sock_diag refused the request")
            fam, state, _, _, sport, dport, src, dst, inode = _MSG.unpack_from(
                data, off + _HDR.size
            )
            sport, dport = socket.ntohs(sport), socket.ntohs(dport)
            if inode and not (state == _TCP_CLOSE and sport == 0):
                status = "ESTABLISHED" if state == _TCP_ESTABLISHED else "LISTEN"
                raddr = f"{_ip(fam, dst)}:{dport}" if dport else None
                out[inode] = Conn(name, f"{_ip(fam, src)}:{sport}", raddr, status)
            off += (length + 3) & ~3
        if not data:
            return


def socket_table() -> dict[int, Conn]:
    """LISTEN and ESTABLISHED inet sockets of this network namespace, by inode."""
    out: dict[int, Conn] = {}
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as sock:
            for family in (socket.AF_INET, socket.AF_INET6):
                for proto in (socket.IPPROTO_TCP, socket.IPPROTO_UDP):
                    _diag_dump(sock, family, proto, out)
        return out
    except OSError:
        return _proc_net_table()


def socket_inodes(pid: int) -> set[int]:
    base = f"/proc/{pid}/fd"
    found: set[int] = set()
    try:
        fds = os.listdir(base)
    except OSError:
        return found
    for fd in fds:
        try:
            link = os.readlink(f"{base}/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            found.add(int(link[8:-1]))
    return found


def psutil_conns(pid: int) -> list[Conn]:
    try:
        conns = psutil.Process(pid).net_connections(kind="inet")
    except (psutil.Error, OSError):
        return []
    out = []
    for c in conns:
        if c.status not in ("LISTEN", "ESTABLISHED", "NONE") or not c.laddr:
            continue
        status = "LISTEN" if c.status == "NONE" else c.status
        proto = ("tcp" if c.type == 1 else "udp") + ("6" if c.family == 10 else "")
        raddr = f"{c.raddr.ip}:{c.raddr.port}" if c.raddr else None
        out.append(Conn(proto, f"{c.laddr.ip}:{c.laddr.port}", raddr, status))
    return out
