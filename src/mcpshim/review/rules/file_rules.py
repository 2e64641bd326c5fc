"""File evidence from the kernel (`trace-file`, trace.filefacts): a credential file read
(MCS413), a place that runs later written (MCS414), a file the session wrote then run
(MCS415), a contained family's metadata change outside its write directories (MCS412), and
a program run after its parent read the project's configuration that names it (MCS107,
project code ran: trace.configrun; said once where an exec rule already said MCS107 of
either process).

Each fact keeps its own time (`at`), so review files it under the call in flight when it
happened, whichever process made it (review.filing). The tracer reads no content: a fact
is a path, what the call did and what the kernel answered. Review reads only a project
configuration file of the workspace, for whether it names the program and for its SHA-256,
as the other MCS107 rules read the project files they name; never a credential file.

MCS412: `run --contain --contain-write DIR` restricts writes to beneath DIR, and Landlock
holds what it calls writes (create, write, truncate, unlink, rename, link); chmod, chown
and utime are none of them, so a family can still make a file outside DIR executable, hand
it to another owner or back-date it (medium for a mode or an owner, low for times).

A read the policy lists (`[files] read`, or `[files.tools] NAME` for the tool it was filed
under: `allowed_reads`) is no finding; against a lock, one the tool's card lists is no
departure (review.filedepart). A refused read of a contained session is MCS410.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from mcpshim.family.attribution import Attribution
from mcpshim.family.filefacts import (
    CONFIGURED,
    CREDENTIAL,
    PERSISTENCE,
    RAN_WRITTEN,
    kind_of,
    phrase,
)
from mcpshim.family.images import parse_time
from mcpshim.family.overlap import calls_label
from mcpshim.log.execlog import EventRecord
from mcpshim.log.filerecords import file_record
from mcpshim.review.findings import Evidence, Finding, Severity, define_rule
from mcpshim.review.policy import FilesPolicy
from mcpshim.review.rules.contain_rules import BLOCKED
from mcpshim.review.rules.project_code import sha256_of
from mcpshim.review.rules.runners import PROJECT_SCRIPTS

__all__ = [
    "CREDENTIAL_READ",
    "FILE_RULES",
    "METADATA",
    "PERSISTENCE_WRITE",
    "RAN_WRITTEN_FILE",
    "allowed_reads",
    "configured_said_once",
    "file_finding",
    "metadata_finding",
    "name_writers",
    "writers_of",
]

METADATA = define_rule(
    "MCS412",
    "metadata-outside-write-dirs",
    Severity.MEDIUM,
    "In a contained session with write rules (run --contain --contain-write), a process "
    "changed a file's mode, owner or times outside the write directories: Landlock does not "
    "refuse chmod, chown or utime (low for times).",
    "Find the tool call that did it and why: a mode made executable outside the workspace "
    "is how a planted program is readied to run later.",
    cwe=["CWE-732"],
    answers=(),
)
CREDENTIAL_READ = define_rule(
    "MCS413",
    "credential-file-read",
    Severity.MEDIUM,
    "The tracer saw a process of the session open a credential file (SSH and GnuPG private "
    "keys, cloud CLI credentials, kube and docker configuration, netrc, npmrc, pypirc, git "
    "credentials, gh tokens, keyrings, browser cookie and login stores, a workspace .env): "
    "high for a private key. No content is read or recorded.",
    "If the tool needs the file, list it for that tool ([files.tools] in the policy, or "
    "approve a session that reads it); otherwise find out why the call read it: its "
    "arguments, a changed server, a script it ran.",
    cwe=["CWE-522"],
    confidence="observed",
    answers=("credentials",),
)
PERSISTENCE_WRITE = define_rule(
    "MCS414",
    "persistence-write",
    Severity.HIGH,
    "A process of the session wrote a place that runs later without being asked: a crontab, "
    "a systemd user unit, an XDG autostart entry, a shell start-up file, authorized_keys, a "
    "directory on PATH, a git hook or git configuration (core.hooksPath, an alias with !), "
    "or made a file there executable.",
    "Look at what was written there before anything runs it (a new login shell, a cron "
    "minute, the next commit), and remove it unless the user asked for it.",
    cwe=["CWE-506"],
    confidence="observed",
    answers=("persistence",),
)
RAN_WRITTEN_FILE = define_rule(
    "MCS415",
    "ran-file-session-wrote",
    Severity.HIGH,
    "A process of the session ran a file that a process of the same session had written "
    "(an exec of it, or the script an interpreter was given), matched by path and, where "
    "the tracer saw both, by inode: whoever chose the content chose what ran.",
    "Read what the call that wrote it was asked to write; approve the script in the lock "
    "only if running session-written files is the tool's purpose.",
    cwe=["CWE-494"],
    confidence="observed",
    answers=("ran_written",),
)
FILE_RULES = frozenset({"MCS413", "MCS414", "MCS415"})
_READ_MOST = 1 << 20  # of a configuration file, read for the program's name
_LABEL = "session-written"


def metadata_finding(sid: str, rec: EventRecord, name: str) -> Finding | None:
    """The finding of one metadata `trace-file` record (None for a call that failed)."""
    d = rec.data
    if d.get("result") != "ok" or not isinstance(d.get("pid"), int):
        return None
    change = str(d.get("change") or "?")
    path, detail = str(d.get("path") or "?"), str(d.get("detail") or "")
    to = f" to {detail}" if detail else ""
    who = f"{name} (pid {d['pid']})"
    msg = f"{who} changed the {change} of {path}{to}: {d.get('outside')}"
    text = f"[trace-file] {d.get('time', '?')} pid {d['pid']}: {d.get('call')} {path}{to}"
    data = {k: d.get(k) for k in ("pid", "start", "boot_id") if k in d}
    data.update(command=name, path=path, change=change)
    data["at"] = d.get("time")  # the server's own change: under the call in flight then
    severity = Severity.LOW if change == "times" else None
    return Finding(METADATA, msg, (Evidence(rec.where, text, data),), group=f"session {sid}",
                   key=f"{change}\0{path}", severity=severity)  # fmt: skip


def file_finding(
    sid: str,
    rec: EventRecord,
    name: str,
    files: FilesPolicy,
    names: Mapping[tuple[int, int | None], str] | None = None,
) -> list[Finding]:
    """The findings of one `trace-file` record: MCS412 for a change outside the write
    directories, MCS413/MCS414/MCS415 for a file fact, MCS410 for a read the ruleset
    refused, MCS107 for a program run after its parent read the project's configuration
    (`name`: the program its process ran; `names`: any process's, by pid and start)."""
    out: list[Finding] = []
    if rec.data.get("outside"):
        found = metadata_finding(sid, rec, name)
        out += [found] if found is not None else []
    f = file_record(rec)
    if f is None:
        return out
    kind = kind_of(f)
    who = f"{name} (pid {f.pid})"
    when = rec.data.get("time", "?")
    text = f"[trace-file] {when} pid {f.pid}: {f.call} {f.shown} = {f.result}"
    data = {k: rec.data.get(k) for k in ("pid", "start", "boot_id") if k in rec.data}
    data.update(command=name, path=f.shown, file=f.shown, change=f.change, said=phrase(f))
    data["at"] = rec.data.get("time")  # under the call in flight then (review.filing)
    group = f"session {sid}"
    if f.blocked and kind == CREDENTIAL:
        msg = f"blocked by the lock: {who} {phrase(f).removeprefix('was refused: ')}"
        data["blocked"] = "read"
        ev = (Evidence(rec.where, f"{text}: {f.blocked}", data),)
        out.append(Finding(BLOCKED, msg, ev, group=group, key=f"read\0{f.shown}"))
    elif kind == CREDENTIAL and f.ok and not files.allows_read(None, f.shown):
        data["credential"] = f.credential
        sev = Severity.HIGH if f.private_key else None
        ev = (Evidence(rec.where, text, data),)
        out.append(Finding(CREDENTIAL_READ, f"{who} {phrase(f)}", ev, group=group,
                           key=f"{name}\0{f.shown}", severity=sev))  # fmt: skip
    elif kind == PERSISTENCE and f.ok:
        data["persistence"] = f.persistence
        msg = f"{who} {phrase(f)}: it runs later without being asked"
        out.append(Finding(PERSISTENCE_WRITE, msg, (Evidence(rec.where, text, data),),
                           group=group, key=f"{name}\0{f.shown}"))  # fmt: skip
    elif kind == RAN_WRITTEN and f.written is not None:
        w = f.written
        data.update(written_at=w.time.isoformat(), written_pid=w.pid, written_start=w.start)
        was = w.path.decode("utf-8", "surrogateescape") if w.path is not None else None
        if was is not None:
            data["written_as"] = was
        if f.interpreter:
            data["interpreter"] = f.interpreter
        gap = (f.time - w.time).total_seconds()
        msg = f"{who} {_ran(f.shown, f.interpreter, gap, was, f'pid {w.pid}')}"
        out.append(Finding(RAN_WRITTEN_FILE, msg, (Evidence(rec.where, text, data),),
                           group=group, key=f"{_LABEL}\0{f.shown}"))  # fmt: skip
    elif kind == CONFIGURED and f.configured is not None and f.ok:
        chosen = _configured(group, rec, f, name, data, names or {})
        out += [chosen] if chosen is not None else []
    return out


def _names(path: str, program: str) -> bool | None:
    """Whether the file, as it is now, names the program (its name as a word of its own,
    or its path); None when it cannot be read."""
    try:
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as fh:
            text = fh.read(_READ_MOST)
    except OSError:
        return None
    word = re.escape(os.fsencode(program))
    return re.search(rb"(?<![\w.-])" + word + rb"(?![\w-]|\.\w)", text) is not None


def _configured(group: str, rec: EventRecord, f: Any, name: str, data: dict[str, Any],
                names: Mapping[tuple[int, int | None], str]) -> Finding | None:  # fmt: skip
    """MCS107: the project's configuration its parent read before it ran, where a file of
    it names the program (review reads them now, as the other MCS107 findings read theirs
    for their SHA-256; when none can be read, which one named it is not known and every
    one is said)."""
    c = f.configured
    name = os.path.basename(f.shown) or name  # the program run (the process may run on)
    read = [p.decode("utf-8", "surrogateescape") for p in c.paths]
    said = {p: _names(p, name) for p in read}
    paths = [p for p in read if said[p]] or [p for p in read if said[p] is None]
    if not paths:
        return None  # it read the project's configuration, which does not name this
    hashes = {p: sha256_of(p) for p in paths}
    named = ", ".join(f"{p} (sha256 {hashes[p][:12]})" if hashes[p] else p for p in paths)
    reader = names.get((c.pid, c.start)) or "?"
    data.update(command=name, path=paths[-1], file=paths[-1], read_at=c.time.isoformat(),
                reader={"pid": c.pid, "start": c.start, "command": reader},
                files=[{"path": p, "sha256": hashes[p]} for p in paths])  # fmt: skip
    msg = (f"{reader} (pid {c.pid}) read the project's configuration, then its child ran "
           f"{name} (pid {f.pid}): {named}")  # fmt: skip
    text = f"[trace-file] {rec.data.get('time', '?')} pid {f.pid}: ran {f.shown} after pid " \
        f"{c.pid} read {', '.join(paths)}"  # fmt: skip
    return Finding(PROJECT_SCRIPTS, msg, (Evidence(rec.where, text, data),), group=group,
                   key=f"configured\0{paths[-1]}\0{name}")  # fmt: skip


def configured_said_once(found: Iterable[Finding], extra: Iterable[Finding]) -> list[Finding]:
    """`extra`'s MCS107 from the project's configuration, less what an exec rule in
    `found` already said MCS107 of: the program that ran, or the reader (pytest that read
    pytest.ini is project code already; what its tests start is its own)."""
    said = {(ev.data.get("boot_id"), ev.data.get("pid"), ev.data.get("start_ticks"))
            for f in found if f.rule.id == PROJECT_SCRIPTS.id for ev in f.evidence}  # fmt: skip
    out = []
    for f in extra:
        if f.rule.id != PROJECT_SCRIPTS.id or not f.key.startswith("configured\0"):
            out.append(f)
            continue
        keep = tuple(ev for ev in f.evidence if not _said(ev.data, said))
        if keep:
            out.append(replace(f, evidence=keep, count=min(f.count, len(keep))))
    return out


def _said(d: Mapping[str, Any], said: set[tuple[Any, Any, Any]]) -> bool:
    got = d.get("reader")
    reader: Mapping[str, Any] = got if isinstance(got, dict) else {}
    boot = d.get("boot_id")
    return (boot, d.get("pid"), d.get("start")) in said or (
        boot, reader.get("pid"), reader.get("start")) in said  # fmt: skip


def _ran(path: str, interpreter: str | None, gap: float, was: str | None, writer: str) -> str:
    """ "ran ./build.sh, written 2.1 s earlier by tools/call write_file (id 4)"."""
    how = f" (as the script {interpreter} was given)" if interpreter else ""
    as_ = f" as {was}" if was else ""
    ago = f"{gap:.1f} s" if gap >= 1 else f"{gap * 1000:.0f} ms"
    return f"ran {path}{how}, written{as_} {ago} earlier by {writer}"


def _gap(at: object, was: object) -> float:
    try:
        return (datetime.fromisoformat(str(at)) - datetime.fromisoformat(str(was))).total_seconds()
    except ValueError:
        return 0.0


Writer = Mapping[tuple[str, int, object, str], str]


def name_writers(findings: Iterable[Finding], writer: Writer) -> list[Finding]:
    """The file findings' messages once filed, each from its own first evidence (a part
    filed under another call says that call's process), and MCS415's with the write's call
    named ("by tools/call write_file (id 4)", from `writer`: (boot id, pid, start, write
    time) -> what wrote it then)."""
    out = []
    for f in findings:
        if f.rule.id not in FILE_RULES or not f.evidence:
            out.append(f)
            continue
        d = f.evidence[0].data
        who = f"{d.get('command') or '?'} (pid {d.get('pid')})"
        if f.rule.id != RAN_WRITTEN_FILE.id:
            tail = (
                ": it runs later without being asked" if f.rule.id == PERSISTENCE_WRITE.id else ""
            )
            out.append(replace(f, message=f"{who} {d.get('said')}{tail}"))
            continue
        by = writer.get((str(d.get("boot_id")), int(d.get("written_pid") or -1),
                         d.get("written_start"), str(d.get("written_at"))))  # fmt: skip
        interpreter, was = d.get("interpreter"), d.get("written_as")
        said = _ran(str(d.get("file")), interpreter if isinstance(interpreter, str) else None,
                    _gap(d.get("at"), d.get("written_at")), was if isinstance(was, str) else None,
                    by or f"pid {d.get('written_pid')}")  # fmt: skip
        evidence = f.evidence
        if by is not None:
            evidence = (replace(f.evidence[0], data={**d, "written_by": by}), *f.evidence[1:])
        out.append(replace(f, message=f"{who} {said}", evidence=evidence))
    return out


def writers_of(findings: Iterable[Finding], atts: Iterable[Attribution]) -> Writer:
    """What wrote each file MCS415 says was run: the call in flight when it was written
    (family.attribution: the moment's owner, whichever process wrote it), else the
    server between calls."""
    by_sid = {a.session: a for a in atts}
    out: dict[tuple[str, int, object, str], str] = {}
    for f in findings:
        if f.rule.id != RAN_WRITTEN_FILE.id:
            continue
        sid = f.call.session if f.call is not None else f.group.removeprefix("session ")
        att = by_sid.get(sid.split(" ", 1)[0])
        for ev in f.evidence if att is not None else ():
            assert att is not None
            d = ev.data
            key = (str(d.get("boot_id")), int(d.get("written_pid") or -1), d.get("written_start"),
                   str(d.get("written_at")))  # fmt: skip
            t = parse_time(d.get("written_at"))
            if t is None or key in out:
                continue
            node = next((n for n in att.nodes() if (n.boot_id, n.pid, n.start) == key[:3]), None)
            owner = att.owner_at(None if node is att.server else node, t)
            if isinstance(owner, int):
                out[key] = att.calls[owner].label
            elif isinstance(owner, tuple):
                out[key] = f"one of calls {calls_label(owner)} (in flight together)"
            else:
                out[key] = f"pid {key[1]}, between tool calls"
    return out


def allowed_reads(findings: Iterable[Finding], files: FilesPolicy) -> list[Finding]:
    """Credential reads filed under a call whose tool the policy lets read that file
    (`[files.tools] NAME`) dropped."""
    out = []
    for f in findings:
        tool = f.call.name if f.call is not None and f.call.method == "tools/call" else None
        paths = [str(ev.data.get("file")) for ev in f.evidence]
        if f.rule.id == CREDENTIAL_READ.id and tool and all(files.allows_read(tool, p)
                                                              for p in paths):  # fmt: skip
            continue
        out.append(f)
    return out
