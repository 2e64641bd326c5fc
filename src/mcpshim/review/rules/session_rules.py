"""Session rules (MCS3xx): what `mcpshim run` saw that no exec record shows.

These read the supervisor's events (session-start, observed, socket, survivor) and the
tracer's socket calls (trace-net: judged by review.rules.connections), not single
program images, so they are not per-image checks: `SessionEvidence` is fed every event
record while review streams the log and turns what it gathered into findings at the end.
Its memory is bounded by the number of sessions and of processes they observed. A session
whose socket calls were traced is judged by them: the sampler's sockets (a sample of what
was open) are no evidence of their own there, and "can reach the network" is a connection
the kernel made, not a helper's name.
"""

from __future__ import annotations

import ipaddress
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mcpshim.base.display import quote_argv
from mcpshim.family.images import invoked_name
from mcpshim.log.execlog import EventRecord, ExecRecord, Record
from mcpshim.log.ledger import sample_is_helper
from mcpshim.review.findings import Evidence, Finding, Severity, define_rule
from mcpshim.review.policy import Policy
from mcpshim.review.rules.connections import net_finding, net_message
from mcpshim.review.rules.contain_rules import blocked_connect
from mcpshim.review.rules.file_rules import file_finding
from mcpshim.review.rules.network import HELPERS, allowed
from mcpshim.review.rules.terminated import terminated_finding

__all__ = [
    "CREDENTIAL_NETWORK",
    "LISTENING",
    "OUTBOUND",
    "SURVIVOR",
    "UNSHIMMED",
    "EventRule",
    "SessionEvidence",
    "session_event",
    "session_findings",
]

SURVIVOR = define_rule(
    "MCS301",
    "session-survivor",
    Severity.MEDIUM,
    "A process of the session was still running when the server exited.",
    "Find what started it (tree --session); run the server with `mcpshim run --on-exit "
    "terminate` so nothing outlives the session, and fix the tool that backgrounds helpers.",
    cwe=["CWE-404"],
    answers=("outlived",),
)
UNSHIMMED = define_rule(
    "MCS302",
    "unshimmed-descendant",
    Severity.LOW,
    "A descendant of the server ran without going through a shim (an absolute path, or a "
    "command with no shim); only the sampler saw it, and only while it lived.",
    "Install a shim for the command (mcpshim install NAME), or call it through PATH; for "
    "complete exec evidence keep `mcpshim run`'s tracing on (the default).",
    cwe=["CWE-778"],
    answers=(),
)
LISTENING = define_rule(
    "MCS303",
    "listening-socket",
    Severity.MEDIUM,
    "A process of the session listened for connections.",
    "A stdio MCP server should not accept connections; find the tool that opened the port, "
    "bind to loopback at most, and close it when the call ends.",
    cwe=["CWE-1327"],
    answers=("network",),
)
OUTBOUND = define_rule(
    "MCS304",
    "unexpected-outbound-connection",
    Severity.MEDIUM,
    "A process of the session held a connection to a destination the policy does not list "
    "(another host, or a local service outside the family: a loopback peer is a network "
    "peer too).",
    "If the destination is expected, add it to [network].destinations in the policy; "
    "otherwise find which tool call made the connection.",
    cwe=["CWE-200"],
    answers=("network",),
)
CREDENTIAL_NETWORK = define_rule(
    "MCS305",
    "credential-env-network-helper",
    Severity.MEDIUM,
    "A network-capable process inherited credential-like environment variables from the "
    "client or the server (names only are recorded); a variable a script inside the family "
    "exported itself (Debian's chromium wrapper exports GOOGLE_API_KEY) is that script's.",
    "Pass only the variables a helper needs (env -i / an allow-list in the server config); "
    "keep tokens out of the environment of helpers that talk to the network.",
    cwe=["CWE-526"],
    answers=("hint",),
)

_NAMES_CAP = 4096
_SHELLS = frozenset({"sh", "dash", "bash", "zsh", "ksh", "mksh", "busybox"})


def _host(addr: str) -> str:
    return addr.rsplit(":", 1)[0].strip("[]")


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(_host(addr)).is_loopback
    except ValueError:
        return False


@dataclass
class _Proc:
    data: Mapping[str, Any]
    where: str


@dataclass
class _Session:
    root: tuple[int | None, int | None] = (None, None)
    traced: bool = False  # the tracer saw every exec: sampling is no evidence of its own
    observed: dict[tuple[int, int | None], _Proc] = field(default_factory=dict)
    listen_ports: set[str] = field(default_factory=set)
    findings: list[Finding] = field(default_factory=list)
    outbound: set[tuple[int, int | None]] = field(default_factory=set)
    established: list[tuple[EventRecord, str]] = field(default_factory=list)
    net_traced: bool = False  # the tracer recorded the socket calls (trace-net, its summary)
    reached: set[tuple[int, int | None]] = field(default_factory=set)  # observed contact
    sampled_listens: list[Finding] = field(default_factory=list)  # said when not net_traced
    #: the trace's findings by (rule, key): a process's repeats of one fact are one evidence,
    #: except in a relayed session, where each keeps its own time (review files each under
    #: the call in flight then, and counts processes per call)
    net: dict[tuple[str, str], tuple[Finding, set[Any]]] = field(default_factory=dict)
    relayed: bool = False
    #: credential-like names the session's command was started with, or the server had
    given: set[str] = field(default_factory=set)
    #: the file facts' findings by (rule, key), each fact's moment its own evidence
    files: dict[tuple[str, str], tuple[Finding, set[Any]]] = field(default_factory=dict)


class SessionEvidence:
    """Fed the log's event records in order; `findings()` gives the MCS3xx findings."""

    def __init__(self, policy: Policy, shim_names: Iterable[str] = (), session: str | None = None):
        self.policy = policy
        self.shim_names = frozenset(shim_names)
        self.session = session
        self._sessions: dict[str, _Session] = {}
        # oldest first; an OrderedDict drops its oldest in O(1) (a dict's first key is found
        # past every key deleted before it: quadratic at the cap)
        self._names: OrderedDict[tuple[int, int | None], str] = OrderedDict()

    def feed_exec(self, session: str, pid: int, start: int | None, shim: str) -> None:
        """`feed` for an exec record, by its fields."""
        if session and (self.session is None or session == self.session):
            # the names of shimmed processes, for the sockets they hold (bounded)
            self._names[(pid, start)] = shim
            if len(self._names) > _NAMES_CAP:
                self._names.popitem(last=False)

    def feed(self, rec: Record) -> None:
        if isinstance(rec, ExecRecord):
            self.feed_exec(rec.session, rec.pid, rec.start, rec.shim)
            return
        sid = rec.data.get("session")
        if not isinstance(sid, str) or (self.session is not None and sid != self.session):
            return
        handler = _HANDLERS.get(rec.kind)
        if handler is not None:
            handler(self, self._sessions.setdefault(sid, _Session()), sid, rec)
        for rule in _EVENT_RULES.get(rec.kind, ()):
            self._sessions.setdefault(sid, _Session()).findings.extend(rule(sid, rec))

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        for sid, s in self._sessions.items():
            out += s.findings + [replace(f, message=net_message(f)) for f, _ids in s.net.values()]
            out += [f for f, _ids in s.files.values()]
            if not s.net_traced:
                out += s.sampled_listens + self._outbound(sid, s)
            out += self._credential_findings(sid, s)
        return out

    # -- handlers -------------------------------------------------------------------------

    def _start(self, s: _Session, sid: str, rec: EventRecord) -> None:
        s.root = (rec.data.get("child_pid"), rec.data.get("child_start"))
        s.traced = rec.data.get("trace") == "strace"
        s.given.update(_names_of(rec.data.get("credential_env")))

    def _observed(self, s: _Session, sid: str, rec: EventRecord) -> None:
        d = rec.data
        ident = (d.get("pid"), d.get("start"))
        if not isinstance(ident[0], int) or sample_is_helper(d):  # (mcpshim's own helper)
            return
        s.observed.setdefault((ident[0], d.get("start")), _Proc(d, rec.where))
        if ident == s.root:
            s.given.update(_names_of(d.get("credential_env")))  # what the server was given
            return  # the server itself, started by mcpshim run
        name = _name(d)
        # Traced: the trace has the process (and a trace-gap, MCS404, one it missed). A
        # shimmed command is MCS405's (shim-bypassed), with its cause (git running itself
        # from its exec-path included).
        if s.traced or name in self.shim_names:
            return
        if name in _SHELLS and "-c" in _argv(d)[1:2]:
            return  # a shell's -c line: MCS105/106 on its exec say it, and how it was run
        severity: Severity | None = Severity.INFO
        message = f"{name} ran without a shim (seen only by sampling)"
        s.findings.append(
            _finding(UNSHIMMED, message, sid, rec, f"{name}\0{d.get('exe', '')}", severity)
        )

    def _socket(self, s: _Session, sid: str, rec: EventRecord) -> None:
        d = rec.data
        laddr, raddr = str(d.get("laddr") or ""), d.get("raddr")
        proto, status = str(d.get("proto") or ""), d.get("status")
        ident = (d.get("pid"), d.get("start"))
        proc = s.observed.get(ident)  # type: ignore[arg-type]
        # its process's sample, its shim record, or the program its socket's sample named
        named = self._names.get(ident) or os.path.basename(str(d.get("exe") or ""))  # type: ignore[arg-type]
        who = (
            _name(proc.data)
            if proc
            else f"{named} (pid {d.get('pid')})"
            if named
            else (f"pid {d.get('pid')}")
        )
        if status == "LISTEN":
            s.listen_ports.add(laddr.rsplit(":", 1)[-1])
            loop = _is_loopback(laddr)
            sev = Severity.LOW if loop or proto.startswith("udp") else None
            where = "on loopback " if loop else ""
            msg = f"{who} listened {where}on {proto} {laddr}"
            s.sampled_listens.append(_finding(LISTENING, msg, sid, rec, f"{proto}\0{laddr}", sev))
            return
        if status != "ESTABLISHED" or not isinstance(raddr, str):
            return
        # Decided at the end: whether a loopback peer is the family's own listener (and
        # whether this end was accepted by one) is known once every LISTEN is in.
        s.established.append((rec, who))

    def _outbound(self, sid: str, s: _Session) -> list[Finding]:
        """ESTABLISHED connections the family made: to another host, or to a local service
        that is not the family's own (a loopback peer is a network peer all the same)."""
        out = []
        seen: set[tuple[object, ...]] = set()
        for rec, who in s.established:
            d = rec.data
            laddr, raddr = str(d.get("laddr") or ""), str(d.get("raddr"))
            one = (d.get("boot_id"), d.get("pid"), d.get("start"), laddr, raddr)
            if one in seen:
                continue  # the same connection at a later sample: seen first is when it was
            seen.add(one)
            if laddr.rsplit(":", 1)[-1] in s.listen_ports:
                continue  # accepted by a listener of the family (a finding of its own)
            local = _is_loopback(raddr)
            if local and raddr.rsplit(":", 1)[-1] in s.listen_ports:
                continue  # the family talking to itself
            if isinstance(d.get("pid"), int):
                s.outbound.add((d["pid"], d.get("start")))
            if allowed(raddr, self.policy.destinations):
                continue
            what = f"the local service at {raddr}" if local else raddr
            msg = f"{who} connected to {what} ({d.get('proto')}), which the policy does not list"
            found = _finding(OUTBOUND, msg, sid, rec, raddr if local else _host(raddr))
            # a moment: the sample that first saw it (review files it under the call then)
            [ev] = found.evidence
            data = {**ev.data, "at": d.get("time"), "destination": raddr}
            out.append(replace(found, evidence=(replace(ev, data=data),)))
        return out

    def _survivor(self, s: _Session, sid: str, rec: EventRecord) -> None:
        d = rec.data
        action = str(d.get("action", "reported"))
        name = _name(d)
        sev = None if action == "reported" else Severity.LOW
        verb = {"reported": "was left running", "terminated": "was terminated (SIGTERM)",
                "killed": "had to be killed (SIGKILL)"}.get(action, action)  # fmt: skip
        msg = f"{name} outlived the server and {verb}"
        s.findings.append(_finding(SURVIVOR, msg, sid, rec, f"{name}\0{_argv(d)[1:2]}", sev))

    def _credential_findings(self, sid: str, s: _Session) -> list[Finding]:
        out = []
        for ident, p in s.observed.items():
            # what the client or the server gave it, not what a script of the family exported
            names = [n for n in _names_of(p.data.get("credential_env")) if n in s.given]
            name = _name(p.data)
            can = ident in s.reached if s.net_traced else name in HELPERS or ident in s.outbound
            if not names or not can:
                continue
            rec = EventRecord("observed", p.data, p.where)
            msg = f"{name} can reach the network and inherited {', '.join(map(str, names))}"
            out.append(_finding(CREDENTIAL_NETWORK, msg, sid, rec, f"{name}\0{sorted(names)}"))
        return out

    def _relayed(self, s: _Session, sid: str, rec: EventRecord) -> None:
        s.relayed = True

    def _summary(self, s: _Session, sid: str, rec: EventRecord) -> None:
        s.net_traced = s.net_traced or "net" in rec.data

    def _trace_exec(self, s: _Session, sid: str, rec: EventRecord) -> None:
        d = rec.data
        if d.get("result") == "ok" and not d.get("shim_script") and isinstance(d.get("pid"), int):
            ran = d.get("resolved") or d.get("filename") or ""  # (/proc/self/exe: the file)
            name = d.get("via_shim") or os.path.basename(str(ran)) or "?"
            self.feed_exec(sid, d["pid"], d.get("start"), str(name))

    def _departure(self, s: _Session, sid: str, rec: EventRecord) -> None:
        s.findings.append(terminated_finding(sid, rec.data, rec.where))  # MCS537, as --lock

    def _file(self, s: _Session, sid: str, rec: EventRecord) -> None:
        d = rec.data
        ident = (d.get("pid"), d.get("start"))
        name = self._names.get(ident) or "?"  # type: ignore[arg-type]
        who = (d.get("boot_id"), *ident)
        for found in file_finding(sid, rec, name, self.policy.files, self._names):
            key = (found.rule.id, found.key or found.message)
            had = s.files.get(key)
            if had is None:
                s.files[key] = (found, {who})
            elif len(had[0].evidence) < _MOMENTS:  # each moment its own (review files each)
                f, whose = had[0], had[1] | {who}
                s.files[key] = (replace(f, evidence=f.evidence + found.evidence,
                                        count=len(whose)), whose)  # fmt: skip

    def _net(self, s: _Session, sid: str, rec: EventRecord) -> None:
        d = rec.data
        s.net_traced = True
        ident = (d.get("pid"), d.get("start"))
        name = self._names.get(ident) or "?"  # type: ignore[arg-type]
        found = net_finding(self.policy, LISTENING, sid, rec, name)
        if d.get("blocked"):  # a contained session's ruleset refused it: MCS410
            found = blocked_connect(sid, rec, name)
        if found is not None:
            key, who = (found.rule.id, found.key or found.message), (d.get("boot_id"), *ident)
            had = s.net.get(key)
            if had is None:
                s.net[key] = (found, {who})
            elif who not in had[1]:  # another process: its own evidence (review splits by call)
                had[1].add(who)
                f = had[0]
                s.net[key] = (replace(f, evidence=f.evidence + found.evidence, count=f.count + 1),
                              had[1])  # fmt: skip
            elif len(had[0].evidence) < _MOMENTS and (
                s.relayed or _new_words(had[0], found)
            ):  # the same process, later: its own time (relayed), or another destination
                f = had[0]
                s.net[key] = (replace(f, evidence=f.evidence + found.evidence), had[1])
        if d.get("outcome") in ("connected", "sent") and isinstance(ident[0], int):
            s.reached.add(ident)  # type: ignore[arg-type]


_MOMENTS = 256  # a relayed session's repeats of one socket fact kept, for filing by call

_HANDLERS = {
    "mcp-session": SessionEvidence._relayed,
    "departure": SessionEvidence._departure,
    "trace-file": SessionEvidence._file,
    "trace-summary": SessionEvidence._summary,
    "trace-exec": SessionEvidence._trace_exec,
    "trace-net": SessionEvidence._net,
    "session-start": SessionEvidence._start,
    "observed": SessionEvidence._observed,
    "socket": SessionEvidence._socket,
    "survivor": SessionEvidence._survivor,
}


#: findings of one event record (its session id, the record), for rules of other modules
EventRule = Callable[[str, EventRecord], Iterable[Finding]]
_EVENT_RULES: dict[str, list[EventRule]] = {}


def session_event(kind: str) -> Callable[[EventRule], EventRule]:
    """Register a rule over each event record of this kind in a session (as `check` does
    for image rules): review feeds it every such record of the sessions it reviews."""

    def deco(fn: EventRule) -> EventRule:
        _EVENT_RULES.setdefault(kind, []).append(fn)
        return fn

    return deco


def _new_words(had: Finding, found: Finding) -> bool:
    """The fact says what the finding's evidence does not yet (another destination)."""
    words = {ev.data.get("said") for ev in had.evidence}
    return any(ev.data.get("said") not in words for ev in found.evidence)


def _names_of(value: Any) -> list[str]:
    return [str(n) for n in value] if isinstance(value, list) else []


def _argv(d: Mapping[str, Any]) -> list[str]:
    raw = d.get("cmdline")
    return [str(a) for a in raw] if isinstance(raw, list) else []


def _name(d: Mapping[str, Any]) -> str:
    """What the process ran as, as the process model names it (family.images)."""
    exe = str(d.get("exe") or "")
    argv = _argv(d)
    own = os.path.basename(exe or (argv[0] if argv else "")) or "?"
    return invoked_name(argv[0].encode("utf-8", "surrogateescape"), own) if argv else own


def _finding(
    rule: Any, message: str, sid: str, rec: EventRecord, key: str, severity: Severity | None = None
) -> Finding:
    d = rec.data
    text = f"[{rec.kind}] {d.get('time', '?')} pid {d.get('pid')}"
    if rec.kind == "socket":
        text += f": {d.get('proto')} {d.get('laddr')} -> {d.get('raddr') or '*'} {d.get('status')}"
    else:
        text += f" ppid {d.get('ppid')}: {quote_argv(_argv(d))} -> {d.get('exe') or '?'}"
    data = {k: d.get(k) for k in ("pid", "ppid", "start", "boot_id", "exe", "action") if k in d}
    data["command"] = _name(d) if rec.kind != "socket" else ""
    data["path"] = str(d.get("exe") or "")
    return Finding(rule, message, (Evidence(rec.where, text, data),), group=f"session {sid}",
                   key=key, severity=severity)  # fmt: skip


def session_findings(
    records: Iterable[Record],
    policy: Policy,
    shim_names: Iterable[str] = (),
    session: str | None = None,
) -> list[Finding]:
    """The MCS3xx findings of every session in `records` (any record kinds; events are used)."""
    ev = SessionEvidence(policy, shim_names, session)
    for rec in records:
        ev.feed(rec)
    return ev.findings()
