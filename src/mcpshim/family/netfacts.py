"""The process model's network facts: each process's socket calls as the kernel answered
them (the tracer's `trace-net` records, typed by log.netrecords), placed on the exec that
made them, and said in the same words by every reader (review, report, cards, OTLP). The
words are raw text: each renderer escapes them its way, as it does every string a process
chose.

A fact is what was observed, never what an argument suggests: `reached` is a connection
made or accepted or a datagram sent; `listened` a listening (or receiving) socket; `tried`
an attempt the kernel refused or whose outcome was never seen. glibc's probe of the nscd
socket on every name lookup is name-service plumbing (`plumbing`): kept in JSON, never said
as network activity. A session whose socket calls were traced (`traced`) is judged by these
facts alone; one that was not keeps the sampler's sockets, and its coverage says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from mcpshim.base.display import json_text
from mcpshim.family.images import Image
from mcpshim.log.netrecords import Identity, NetRecord

__all__ = ["NetFacts", "Process", "destination", "exec_of", "fact_json", "kind_of", "phrase"]


class Process(Protocol):
    """A process as these facts read it: family.tree.Node is one. A protocol, not the
    Node itself: the forest imports the model, which holds these facts."""

    @property
    def boot_id(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def start(self) -> int | None: ...
    @property
    def images(self) -> Sequence[Image]: ...


P = TypeVar("P", bound=Process)

_LISTENED = frozenset({"listening", "bound"})
_FAILED_WORDS = {"in-progress": "in progress, outcome not seen"}


def destination(n: NetRecord) -> str:
    """The other end (connect, send, accept) or its own address (listen, bind), as text:
    127.0.0.1:80, [::1]:53, a Unix socket's path (@name: an abstract one)."""
    if n.family == "unix":
        path = json_text(n.address) if n.address else "(unnamed)"
        return f"@{path.lstrip('@')}" if n.abstract else path
    if n.address is None:
        return n.family
    host = n.address.decode("ascii", "replace")
    host = f"[{host}]" if ":" in host else host
    if n.port == 0 and n.call in ("listen", "bind"):
        return f"{host}:*"  # a port the kernel chose, which the program never asked for
    return f"{host}:{n.port}" if n.port is not None else host


def _transport(n: NetRecord) -> str:
    if n.family == "unix":
        return f"unix {n.transport}" if n.transport else "unix"
    return n.transport or n.family


def kind_of(n: NetRecord) -> str:
    """reached, listened, tried, plumbing (nscd's probe), or other (a UDP association)."""
    if n.purpose == "name-service" and not n.reached:
        return "plumbing"
    if n.purpose == "source-port":
        return "other"  # a client's own port: its connect or send is the fact
    if n.reached:
        return "reached"
    if n.outcome in _LISTENED:
        return "listened"
    if n.outcome == "associated":
        return "other"
    return "tried"


def phrase(n: NetRecord) -> str:
    """What the call did, in the words every reader uses."""
    dest, how = destination(n), _transport(n)
    times = f" (x{n.count})" if n.count > 1 else ""
    if n.purpose == "dns" and n.queries and n.call == "send":
        names = ", ".join(f"{json_text(q.name)} ({q.type})" for q in n.queries)
        return f"looked up {names} via the resolver {dest}{times}"
    if n.call == "connect" and n.outcome == "connected":
        return f"connected to {dest} ({how})"
    if n.call == "send" and n.outcome == "sent":
        verb = "sent a DNS query to" if n.purpose == "dns" else "sent a datagram to"
        return f"{verb} {dest} ({how}){times}"
    if n.call == "accept" and n.outcome == "accepted":
        on = f" on port {n.local_port}" if n.local_port is not None else ""
        return f"accepted a connection from {dest}{on} ({how})"
    if n.outcome == "listening":
        return f"listened on {dest} ({how})"
    if n.outcome == "bound" and n.purpose == "source-port":
        return f"bound {dest} as its own port for what it sends ({how})"
    if n.outcome == "bound":
        return f"bound {dest} to receive ({how})"
    if n.outcome == "associated":
        return f"set {dest} as its peer ({how}; nothing sent)"
    what = {"listen": "to listen on ", "bind": "to bind "}.get(n.call, "")
    outcome = _FAILED_WORDS.get(n.outcome, n.outcome)
    return f"tried {what}{dest} ({how}): {outcome}{times}"


def exec_of(n: NetRecord, images: Sequence[Image]) -> Image | None:
    """The exec its process was running when it made the call (the last one before it)."""
    found = None
    for img in images:
        if img.entry and (img.time is None or img.time <= n.time):
            found = img
    return found or next((i for i in images if i.entry), images[0] if images else None)


def fact_json(n: NetRecord, img: Image | None) -> dict[str, Any]:
    """One fact as review JSON, report and cards carry it: the process, the exec, the call."""
    out: dict[str, Any] = {
        "pid": n.pid,
        "start": n.start,
        "command": img.command if img is not None else None,
        "time": n.time.isoformat(),
        "call": n.call,
        "family": n.family,
        "transport": n.transport,
        "destination": destination(n),
        "address": json_text(n.address) if n.address is not None else None,
        "port": n.port,
        "outcome": n.outcome,
        "reached": n.reached,
        "kind": kind_of(n),
        "text": phrase(n),
    }
    if n.errno:
        out["errno"] = n.errno
    if n.purpose:
        out["purpose"] = n.purpose
    if n.queries:
        out["queries"] = [{"name": json_text(q.name), "type": q.type} for q in n.queries]
    if n.count > 1:
        out["count"] = n.count
    return out


@dataclass
class NetFacts:
    """Every process's network facts, by identity, and the sessions whose socket calls were
    traced (their trace-summary counted them: zero records is an answer there)."""

    by_ident: dict[Identity, list[NetRecord]] = field(default_factory=dict)
    traced: set[str] = field(default_factory=set)

    def add(self, n: NetRecord) -> None:
        self.by_ident.setdefault(n.identity, []).append(n)
        if n.session:
            self.traced.add(n.session)

    def is_traced(self, session: str) -> bool:
        return session in self.traced

    def of(self, node: Process) -> list[NetRecord]:
        return self.by_ident.get((node.boot_id, node.pid, node.start), [])

    def said(self, node: Process) -> dict[int, list[str]]:
        """What each exec of a process did on the network, by the image's id(): the facts
        a reader shows beside it (nscd's probe and UDP associations left out; JSON keeps
        them, with their kind)."""
        said = self.said_at((node.boot_id, node.pid, node.start), node.images)
        return {id(node.images[i]): lines for i, lines in said.items()}

    def said_at(self, ident: Identity, images: Sequence[Image]) -> dict[int, list[str]]:
        """`said` of the process `ident` whose images are `images`, by index there (the
        tree printer reads columns: it has no Node to give)."""
        out: dict[int, list[str]] = {}
        for n in self.by_ident.get(ident, ()):
            img = exec_of(n, images)
            if img is not None and kind_of(n) not in ("plumbing", "other"):
                at = next(i for i, m in enumerate(images) if m is img)
                out.setdefault(at, []).append(phrase(n))
        return out

    def facts(self, nodes: Iterable[P]) -> list[tuple[P, Image | None, NetRecord]]:
        """Each node's facts with the exec that made each, in time order."""
        out = [(node, exec_of(n, node.images), n) for node in nodes for n in self.of(node)]
        return sorted(out, key=lambda t: t[2].time)
