"""What each tool of a relayed session was seen to do: the evidence approval cards are built
from and departures are measured against.

Per owner (a tool call, the candidates of an ambiguous start, or nothing: the server itself
and what no call started) it gathers the executables that ran (with their argument shapes,
cwd and how they were reached: PATH, an absolute path, a project file such as package.json
scripts or a Makefile, a git hook), network destinations (the sampler's sockets, and the
destinations of network helpers' arguments), credential-like variable names the sampler
found in the processes' environments, the user they ran as, and which outlived the call.

Only executables that are evidence of an exec count: the process model's execs (each once,
whichever sources saw it: family.model), so two sessions that ran the same programs have
the same executables, however the sampler's ticks fell.

`SessionEvidence` keeps, from the same pass over the log as attribution, what attribution
does not: the contract records (initialize, tools/resources/prompts listings), sockets,
credential names, refusals and departures.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcpshim.family.attribution import Anchor, Attribution, Collector, Owner
from mcpshim.family.netfacts import destination, kind_of
from mcpshim.family.tree import Image, Node
from mcpshim.log.execlog import EventRecord, Record
from mcpshim.log.filerecords import FileRecord, file_record
from mcpshim.review.fileseen import FileSeen, file_owners
from mcpshim.review.lockscope import lock_owner, net_owner
from mcpshim.review.rules import network, runners
from mcpshim.review.shapes import command_name, name_pattern, shape

__all__ = [
    "Seen",
    "SessionEvidence",
    "Use",
    "images_that_ran",
    "lock_owner",
    "relayed_sessions",
    "seen_by_owner",
    "seen_by_tool",
    "tool_of",
]

Ident = tuple[int, int | None]
_KINDS = frozenset(
    {"mcp-initialize", "mcp-tools", "mcp-resources", "mcp-prompts", "mcp-refused", "socket",
     "observed", "survivor", "terminated", "departure", "session-start", "trace-net",
     "trace-file"}
)  # fmt: skip


@dataclass
class SessionEvidence:
    """One session's records that attribution does not keep (see the module docstring)."""

    session: str
    initialize: Mapping[str, Any] | None = None
    init_where: str = ""
    listings: list[dict[str, Mapping[str, Any]]] = field(default_factory=list)  # tools
    listing_where: list[str] = field(default_factory=list)
    resources: dict[str, str] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)
    sockets: dict[Ident, list[tuple[Mapping[str, Any], str]]] = field(default_factory=dict)
    listen_ports: set[str] = field(default_factory=set)
    creds: dict[Ident, set[str]] = field(default_factory=dict)
    uids: dict[Ident, int] = field(default_factory=dict)
    refused: list[tuple[Mapping[str, Any], str]] = field(default_factory=list)
    departures: list[tuple[Mapping[str, Any], str]] = field(default_factory=list)
    blocked: list[EventRecord] = field(default_factory=list)  # refused connects (trace-net)
    files: list[FileRecord] = field(default_factory=list)  # file facts (trace-file)
    server_creds: tuple[str, ...] = ()
    user: str = ""
    uid: int | None = None

    def feed(self, rec: Record) -> None:
        if not isinstance(rec, EventRecord) or rec.kind not in _KINDS:
            return
        d = rec.data
        if d.get("session") != self.session:
            return
        k = rec.kind
        ident = (d.get("pid"), d.get("start"))
        if k == "mcp-initialize":
            self.initialize, self.init_where = d, rec.where
        elif k == "mcp-tools":
            tools: dict[str, Mapping[str, Any]] = {
                str(t["name"]): t for t in d.get("tools", []) if isinstance(t, dict)
            }
            # a later page (its request's cursor) or a later part of one page (relay.listings)
            if (d.get("cursor") is None and not d.get("part")) or not self.listings:
                self.listings.append(tools)
                self.listing_where.append(rec.where)
            else:
                self.listings[-1].update(tools)
        elif k in ("mcp-resources", "mcp-prompts"):
            into = self.resources if k == "mcp-resources" else self.prompts
            key = "resources" if k == "mcp-resources" else "prompts"
            for item in d.get(key, []):
                if isinstance(item, dict) and isinstance(item.get("name"), str):
                    into[item["name"]] = str(item.get("sha256", ""))
        elif k == "mcp-refused":
            self.refused.append((d, rec.where))
        elif k == "departure":
            self.departures.append((d, rec.where))
        elif k == "trace-net":
            if d.get("blocked"):  # a connect a contained session's ruleset refused
                self.blocked.append(rec)
        elif k == "trace-file":
            f = file_record(rec)
            if f is not None:
                self.files.append(f)
        elif k == "session-start":
            self.server_creds = tuple(d.get("credential_env", ()))
            self.user, uid = str(d.get("user", "")), d.get("uid")
            self.uid = uid if isinstance(uid, int) else None
        elif k == "socket" and isinstance(ident[0], int):
            self.sockets.setdefault(ident, []).append((d, rec.where))  # type: ignore[arg-type]
            if d.get("status") == "LISTEN":
                self.listen_ports.add(str(d.get("laddr", "")).rsplit(":", 1)[-1])
        elif isinstance(ident[0], int):  # observed, survivor, terminated: a process's facts
            names = d.get("credential_env")
            if isinstance(names, list):
                self.creds.setdefault(ident, set()).update(str(n) for n in names)  # type: ignore[arg-type]
            if isinstance(d.get("uid"), int):
                self.uids[ident] = d["uid"]  # type: ignore[index]

    def tee(self, records: Iterable[Record]) -> Iterator[Record]:
        for rec in records:
            self.feed(rec)
            yield rec

    @property
    def tools(self) -> dict[str, Mapping[str, Any]]:
        """The tools as last listed (every page of the last listing)."""
        return self.listings[-1] if self.listings else {}


@dataclass
class Use:
    """One executable as an owner ran it."""

    path: str
    node: Node
    image: Image
    shapes: dict[str, tuple[Node, Image]] = field(default_factory=dict)
    reached: set[str] = field(default_factory=set)
    count: int = 0


@dataclass
class Seen:
    """What one owner was seen to do, each fact with the process and image that prove it."""

    uses: dict[str, Use] = field(default_factory=dict)
    cwds: dict[str, tuple[Node, Image]] = field(default_factory=dict)
    destinations: dict[str, tuple[Node, str]] = field(default_factory=dict)  # where, text
    listens: dict[str, tuple[Node, str]] = field(default_factory=dict)
    #: traced sessions: what was tried and not reached ("127.0.0.1:9: refused")
    tried: dict[str, tuple[Node, str]] = field(default_factory=dict)
    creds: dict[str, Node] = field(default_factory=dict)
    users: set[str] = field(default_factory=set)
    outlived: list[tuple[Node, str, str]] = field(default_factory=list)  # node, where, text
    project: dict[str, Node] = field(default_factory=dict)  # "file (runner)" -> process
    processes: int = 0
    server: Use | None = None  # the server's own program (owner None only)
    #: processes counted here that overlapping calls could each have started, and those
    #: calls (their indices): an approval made from them says so
    shared: int = 0
    shared_calls: set[int] = field(default_factory=set)
    #: credential files read, places that run later written, written files run
    files: FileSeen = field(default_factory=FileSeen)


def images_that_ran(node: Node) -> list[Image]:
    """The process's execs (the process model's entries) that name a file. A shim's record
    whose exec of its target a contained session's ruleset refused is no evidence: that
    program never ran."""
    refused = {i.argv0 for i in node.images if i.source.startswith("trace-blocked/")}
    return [
        i
        for i in node.images
        if i.entry and i.target and not (i.source == "shim" and i.target in refused)
    ]


def _after_spawn(node: Node, att: Attribution) -> list[Image]:
    """The server's images from the exec of its command on (e.g. the npx it was started as):
    a sample before that exec shows the supervisor's own image, not a program of the server."""
    imgs = images_that_ran(node)
    command = [str(a) for a in (att.start or {}).get("command", ())]
    for k, img in enumerate(imgs):
        argv = [a.decode("utf-8", "surrogateescape") for a in (img.argv0, *img.args)]
        if img.source == "shim" or argv == command:
            return imgs[k:]
    return imgs[-1:]


def _reached(img: Image) -> str:
    if img.source == "shim":
        return "PATH"
    if b"/" in img.argv0:
        return "absolute path"
    seen = "traced" if img.source.startswith("trace") else "sampled"
    return f"PATH, no shim took part ({seen})"


def _project_file(node: Node) -> str | None:
    """The project file whose script started this process: the nearest runner above it
    (npm/yarn/pnpm scripts, make) or a git hook."""
    target = node.current.target.decode("utf-8", "surrogateescape") if node.images else ""
    if "/.git/hooks/" in target or ("/hooks/" in target and _has_git_above(node)):
        return f"git hook {target}"
    p = node.parent
    while p is not None and p.known:
        for img in p.images:
            name = command_name(img)
            if name in runners._PROJECT_FILES and runners._runs_scripts(img, name):
                return _runner_file(img, name)
        p = p.parent
    return None


def _has_git_above(node: Node) -> bool:
    p = node.parent
    while p is not None and p.known:
        if any(command_name(i) == "git" for i in p.images):
            return True
        p = p.parent
    return False


@functools.lru_cache(maxsize=4096)
def _found_file(cwd: str, files: tuple[str, ...]) -> str:
    return next((f for f in files if os.path.isfile(os.path.join(cwd, f))), files[-1])


def _runner_file(img: Image, name: str) -> str:
    cwd = img.cwd.decode("utf-8", "surrogateescape")
    files = runners._PROJECT_FILES[name]
    found = _found_file(cwd, tuple(files))
    args = " ".join(a.decode("utf-8", "replace") for a in img.args[:2])
    return f"{os.path.join(cwd, found)} ({name} {args})".replace(" )", ")")


def _runs_project_scripts(img: Image) -> str | None:
    name = command_name(img)
    if name in runners._PROJECT_FILES and runners._runs_scripts(img, name):
        return _runner_file(img, name)
    return None


def _user(uid: int | None, ev: SessionEvidence) -> str:
    if uid is None or uid == ev.uid:
        return ev.user or (f"uid {ev.uid}" if ev.uid is not None else "the server's user")
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def _add_net(seen: Seen, att: Attribution, node: Node, only: Owner = -1) -> None:
    """The node's socket facts into `seen` (`only`: those whose owner is that)."""
    for n in att.net.of(node):
        if only != -1 and net_owner(att, node, n) != only:
            continue
        kind, dest = kind_of(n), name_pattern(destination(n))
        udp = " (udp)" if n.transport == "udp" else ""
        if kind == "reached" and n.call != "accept":
            seen.destinations.setdefault(dest + udp, (node, n.where))
        elif kind == "listened":
            seen.listens.setdefault(dest.rsplit(":", 1)[0] + udp if n.port is not None
                                    else dest, (node, n.where))  # fmt: skip
        elif kind == "tried":
            seen.tried.setdefault(f"{dest}{udp}: {n.outcome}", (node, n.where))


def _add_node(seen: Seen, att: Attribution, node: Node, ev: SessionEvidence) -> None:
    seen.processes += 1
    traced = att.net.is_traced(att.session)
    ident = (node.pid, node.start)
    via = _project_file(node)
    imgs = images_that_ran(node)
    if node is att.server:  # its own program (its last image), held apart from what it starts
        img = node.current
        path = img.target.decode("utf-8", "surrogateescape")
        seen.server = Use(path, node, img, {shape(img): (node, img)}, {_reached(img)}, 1)
        imgs = [i for i in _after_spawn(node, att) if i.target != img.target]
    for img in imgs:
        path = img.target.decode("utf-8", "surrogateescape")
        use = seen.uses.get(path)
        if use is None:
            use = seen.uses[path] = Use(path, node, img)
        use.count += 1
        use.shapes.setdefault(shape(img), (node, img))
        use.reached.add(_reached(img))
        if via is not None:
            use.reached.add(f"project file {via}")
        if img.cwd:
            seen.cwds.setdefault(img.cwd.decode("utf-8", "surrogateescape"), (node, img))
        runner = _runs_project_scripts(img)
        if runner is not None:
            seen.project.setdefault(runner, node)
        for d in (network.destinations(img) or ()) if not traced else ():
            seen.destinations.setdefault(d, (node, img.where))
    seen.users.add(_user(ev.uids.get(ident), ev))
    names = set(ev.creds.get(ident, ()))
    if node is att.server:
        names |= set(ev.server_creds)
    for n in sorted(names):
        seen.creds.setdefault(n, node)
    # traced: the kernel's facts (by their own time: seen_by_owner and seen_by_tool add
    # them), not a helper's arguments nor a sample's sockets
    for sock, where in ev.sockets.get(ident, ()) if not traced else ():
        laddr, raddr = str(sock.get("laddr", "")), sock.get("raddr")
        udp = " (udp)" if str(sock.get("proto", "")).startswith("udp") else ""
        if sock.get("status") == "LISTEN":
            seen.listens.setdefault(laddr.rsplit(":", 1)[0] + udp, (node, where))
        elif isinstance(raddr, str) and laddr.rsplit(":", 1)[-1] not in ev.listen_ports:
            seen.destinations.setdefault(raddr + udp, (node, where))
    if node.id in att.outlived:
        where, text = att.outlived[node.id]
        seen.outlived.append((node, where or node.images[0].where, text))


def seen_by_owner(att: Attribution, ev: SessionEvidence) -> dict[Owner, Seen]:
    """What each owner did: a call's index, an ambiguous start's candidates, None for the
    server and what no call started. One pass over the session's processes."""
    out: dict[Owner, Seen] = {}
    for node in att.nodes():
        _add_node(out.setdefault(lock_owner(att, node), Seen()), att, node, ev)
    if att.net.is_traced(att.session):
        for node in att.nodes():
            owners = {net_owner(att, node, n) for n in att.net.of(node)}
            for owner in owners:
                _add_net(out.setdefault(owner, Seen()), att, node, owner)
    for f, owner, proc in file_owners(att, ev.files):
        out.setdefault(owner, Seen()).files.add(f, proc)
    return out


def tool_of(att: Attribution, owner: Owner) -> list[str | None]:
    """The tools an owner stands for: a tools/call's tool; None for the server and for
    what no tool call started (resources/read, prompts/get, nothing)."""
    if owner is None:
        return [None]
    idx = (owner,) if isinstance(owner, int) else owner
    calls = [att.calls[i] for i in idx]
    return list(dict.fromkeys(c.name if c.method == "tools/call" else None for c in calls))


def seen_by_tool(att: Attribution, ev: SessionEvidence) -> dict[str | None, Seen]:
    """What each tool did over all its calls (a process of overlapping calls counts for
    each candidate), and under None what the server did outside tool calls."""
    out: dict[str | None, Seen] = {}
    for node in att.nodes():
        owner = lock_owner(att, node)
        for tool in tool_of(att, owner):
            seen = out.setdefault(tool, Seen())
            _add_node(seen, att, node, ev)
            if isinstance(owner, tuple):
                seen.shared += 1
                seen.shared_calls.update(owner)
    if att.net.is_traced(att.session):
        for node in att.nodes():
            for owner in {net_owner(att, node, n) for n in att.net.of(node)}:
                for tool in tool_of(att, owner):
                    _add_net(out.setdefault(tool, Seen()), att, node, owner)
    for f, owner, proc in file_owners(att, ev.files):
        for tool in tool_of(att, owner):
            out.setdefault(tool, Seen()).files.add(f, proc)
    return out


def relayed_sessions(
    records: Iterable[Record], anchor: Anchor, session: str | None = None
) -> list[tuple[Attribution, SessionEvidence]]:
    """Every relayed session (or just `session`) attributed, with its evidence: one pass."""
    collector = Collector(session)
    evidence: dict[str, SessionEvidence] = {}
    for rec in records:
        collector.feed(rec)
        if isinstance(rec, EventRecord) and rec.kind == "mcp-session":
            sid = rec.data.get("session")
            if isinstance(sid, str) and (session is None or sid == session):
                evidence.setdefault(sid, SessionEvidence(sid))
        if evidence and isinstance(rec, EventRecord):
            sid = rec.data.get("session")
            if isinstance(sid, str) and sid in evidence:
                evidence[sid].feed(rec)
    return [(att, evidence[att.session]) for att in collector.results(anchor)]
