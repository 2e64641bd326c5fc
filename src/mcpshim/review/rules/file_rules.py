"""MCS412: a contained family changed a file's mode, owner or times outside its write
directories.

`run --contain --contain-write DIR` restricts writes to beneath DIR, and Landlock holds
what it calls writes (create, write, truncate, unlink, rename, link); chmod, chown and
utime are none of them, so a family can still make a file outside DIR executable, hand it
to another owner or back-date it. The tracer traces these calls in such a session and
records each change outside the write directories (`trace-file`, trace.metaparse); each is
a finding filed under the tool call whose process made it (medium for a mode or an owner,
low for times; a call that failed changed nothing and is no finding).
"""

from __future__ import annotations

from mcpshim.log.execlog import EventRecord
from mcpshim.review.findings import Evidence, Finding, Severity, define_rule

__all__ = ["METADATA", "metadata_finding"]

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


def metadata_finding(sid: str, rec: EventRecord, name: str) -> Finding | None:
    """The finding of one `trace-file` record (None for a call that failed)."""
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
