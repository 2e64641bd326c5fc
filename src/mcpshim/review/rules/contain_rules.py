"""Containment rules (MCS41x): what a contained session's ruleset refused, and the ways
around a ruleset that checks paths.

Under `run --contain` the kernel refuses (EACCES) an exec of a program the lock did not
approve and a TCP connect to a port it does not list; the tracer marks each refusal it
recorded (`blocked` on the `trace-exec` record, whose image is `trace-blocked/ERRNO`, and
on the connect's `trace-net` record). Each is a departure that did not happen: MCS410,
filed like any finding under the tool call whose process tried (session_rules reads the
trace-net records and asks `blocked_connect` here).

Landlock checks the file an exec names. The ELF loader, which every dynamic program needs,
run as a program loads whatever file it is given, and a program written into a memfd is
no file a rule can name: both run past the ruleset (MCS411, in any traced session, high in
every view: `review --lock` says it with this message in place of a new executable).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator

from mcpshim.family.attribution import Attribution, Owner
from mcpshim.family.netfacts import destination
from mcpshim.family.tree import Image
from mcpshim.log.execlog import EventRecord
from mcpshim.log.netrecords import net_record
from mcpshim.review.findings import Evidence, Finding, Severity, define_rule
from mcpshim.review.rules.mcp_rules import call_in_flight
from mcpshim.review.rules.registry import Context, Hit, check

__all__ = [
    "BLOCKED",
    "PAST_RULESET",
    "blocked_connect",
    "blocked_departures",
    "blocked_exec",
    "past_ruleset",
    "past_ruleset_message",
]

BLOCKED = define_rule(
    "MCS410",
    "blocked-by-lock",
    Severity.MEDIUM,
    "In a contained session (run --contain), the kernel refused an exec of a program the lock "
    "did not approve, or a TCP connect to a port it does not list: a departure that did not "
    "happen. The process got EACCES; the program never ran, the connection never opened.",
    "If the tool should do this, approve a session in which it does (mcpshim approve) and "
    "run contained again; otherwise find out why it tried: the call's arguments, an edited "
    "project file or script, a changed server.",
    cwe=["CWE-284"],
    answers=(),
)
PAST_RULESET = define_rule(
    "MCS411",
    "exec-past-path-rules",
    Severity.HIGH,
    "A process ran the ELF loader as a program (ld.so FILE), or a program from memory (a "
    "memfd): either runs code no exec of its file shows, past shims and past a contained "
    "session's ruleset, which checks the paths that are executed.",
    "Find the tool call that did it (review files it there) and what it loaded; a tool has "
    "no ordinary reason to do either.",
    cwe=["CWE-284", "CWE-693"],
    answers=(),
)

_LOADER = re.compile(rb"^ld(?:-linux[\w.-]*|-musl[\w.-]*)?\.so(?:\.\d+)*$")
_LOADER_VALUED = frozenset(
    {b"--library-path", b"--preload", b"--audit", b"--argv0", b"--inhibit-rpath"}
)


def _loaded(args: tuple[bytes, ...]) -> bytes:
    """The program an ld.so command line loads: its first operand."""
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in _LOADER_VALUED:
            skip = True
        elif not a.startswith(b"-"):
            return a
    return b"?"


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _exec_message(img: Image) -> str:
    errno = img.source.partition("/")[2]
    tried = _text(img.argv0)
    where = f" (in {_text(img.cwd)})" if img.cwd and not tried.startswith("/") else ""
    return f"blocked by the lock: exec of {tried}{where} refused ({errno}); it never ran"


@check(BLOCKED)
def blocked_exec(ctx: Context, img: Image) -> Iterator[Hit]:
    if not img.source.startswith("trace-blocked/"):
        return
    tried = _text(img.argv0)
    errno = img.source.partition("/")[2]
    yield Hit(
        BLOCKED,
        _exec_message(img),
        f"exec\0{tried}",
        tried,
        {"command": os.path.basename(tried), "path": tried, "errno": errno, "blocked": "exec"},
    )


def _connect(sid: str, rec: EventRecord, name: str, group: str, key: str) -> Finding | None:
    """MCS410 for a `trace-net` connect whose record says the ruleset refused it."""
    d, n = rec.data, net_record(rec)
    why = d.get("blocked")
    if n is None or not why or n.call != "connect":
        return None
    raddr = destination(n)
    who = f"{name} (pid {n.pid})"
    text = f"[trace-net] {d.get('time', '?')} pid {n.pid}: connect {raddr} = {n.errno}: {why}"
    data = {k: d.get(k) for k in ("pid", "start", "boot_id") if k in d}
    data.update(command=name, path="", raddr=raddr, blocked="connect")
    data["at"] = d.get("time")  # the server's own connect: under the call in flight then
    msg = f"blocked by the lock: {who} connect to {raddr} refused ({n.errno})"
    ev = Evidence(rec.where, text, data)
    return Finding(
        BLOCKED, msg, (ev,), group=group or f"session {sid}", key=f"{key}connect\0{n.port}"
    )


def blocked_connect(sid: str, rec: EventRecord, name: str) -> Finding | None:
    """A refused connect of a contained session, filed under its session (review moves
    it under the call whose process tried)."""
    return _connect(sid, rec, name, "", "")


def blocked_departures(
    att: Attribution,
    connects: Iterable[EventRecord],
    place: Callable[[Owner], tuple[str, str]],
) -> list[Finding]:
    """`review --lock`: what the session's ruleset refused, under the owner that tried
    (`place` gives an owner's heading and the key part that names its tool)."""
    out: list[Finding] = []
    for node in att.nodes():
        owner = None if node is att.server else att.owner.get(node.id)
        for img in node.images:
            if img.source.startswith("trace-blocked/"):
                group, tool = place(owner)
                data = {"command": os.path.basename(_text(img.argv0)), "path": _text(img.argv0),
                        "pid": node.pid, "start_ticks": node.start, "boot_id": node.boot_id,
                        "blocked": "exec"}  # fmt: skip
                text = f"[{img.source}] pid {img.pid}: {_text(img.argv0)}"
                out.append(Finding(BLOCKED, _exec_message(img), (Evidence(img.where, text, data),),
                                   group, key=f"{tool}\0exec\0{_text(img.argv0)}"))  # fmt: skip
    for rec in connects:
        d = rec.data
        pid, start = d.get("pid"), d.get("start")
        owner = att.owner_of(str(d.get("boot_id")), pid, start) if isinstance(pid, int) else None
        server = att.server
        if server is not None and (server.pid, server.start) == (pid, start):
            call = call_in_flight(att, d.get("time"))
            owner = call.index if call is not None else None
        group, tool = place(owner)
        ident = (d.get("boot_id"), pid, start)
        name = next((n.images[-1].command for n in att.nodes()
                     if n.images and (n.boot_id, n.pid, n.start) == ident), "?")  # fmt: skip
        found = _connect(att.session, rec, name, group, f"{tool}\0")
        if found is not None:
            out.append(found)
    return out


def past_ruleset_message(img: Image) -> str | None:
    """MCS411's message for an image that ran code no exec of its file shows (the loader
    run as a program, a memfd), else None: one wording, and one severity, in every view
    (plain review here, `review --lock` in review.departures, which says it instead of a
    new executable)."""
    if img.source != "trace":  # what the tracer saw run (no shim's, no refused attempt)
        return None
    target = img.target
    name = os.path.basename(target)
    if target.startswith(b"/memfd:"):
        what = f"a program from memory ({_text(target)})"
    elif _LOADER.match(name) and img.args:
        what = f"the ELF loader {_text(target)} on {_text(_loaded(img.args))}"
    else:
        return None
    return f"ran {what}: code no exec of its file shows"


@check(PAST_RULESET)
def past_ruleset(ctx: Context, img: Image) -> Iterator[Hit]:
    msg = past_ruleset_message(img)
    if msg is None:
        return
    name = os.path.basename(img.target)
    yield Hit(
        PAST_RULESET,
        msg,
        f"{_text(name)}",
        _text(img.target),
        {"command": _text(name), "path": _text(img.target)},
    )
