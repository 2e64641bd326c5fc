"""`log --format ecs`: one Elastic Common Schema document per exec of the process model,
one per traced process that never exec'd, and one per socket call and file fact the
tracer recorded.

Each exec once (family.model), whichever sources saw it: a shim's exec is one document
(its hop is part of it), a traced exec no shim saw is one too, a sample of a traced
process is none, so a shipper counts what `tree`, `review` and `sessions` count. A
`trace-net` record is a network event on the same `process.entity_id`, in the words
`tree` and `review` use (family.netfacts) as its message. A `trace-file` record is a file
event on it too (`file.path`, the table's label, what the call did: family.filefacts);
a process that forked and never exec'd has its own `mcpshim.process` document, so the
entity id of every file and network event is a document's, whichever process made it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from mcpshim.base.display import json_text, quote_argv
from mcpshim.family import filefacts
from mcpshim.family.images import Image
from mcpshim.family.netfacts import destination, kind_of, phrase
from mcpshim.log.execlog import CLK_TCK
from mcpshim.log.filerecords import FileRecord
from mcpshim.log.logview import entity_id
from mcpshim.log.netrecords import NetRecord

__all__ = ["ecs_doc", "ecs_file_doc", "ecs_fork_doc", "ecs_net_doc"]

#: a file fact's change as ECS's event.type
_FILE_TYPES = {"open": "access", "run": "access", "create": "creation",
               "rename": "creation", "link": "creation"}  # fmt: skip


#: the record's outcome as ECS's event.outcome
_SUCCESS = frozenset({"connected", "accepted", "sent", "listening", "bound", "associated"})
_UNKNOWN = frozenset({"in-progress"})


def _ts(t: datetime | None) -> str | None:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" if t else None


def ecs_doc(
    img: Image, anchor: Callable[[str], float | None], user_id: int | None = None
) -> dict[str, Any]:
    """One exec as an ECS process-start event (`anchor`: boot time by boot id). A process
    known only as a shim's parent (its shell; no exec of it was seen) is an `info` event
    with what is known of it: its pid, name, argv and start, no executable and no parent.
    No field is null: what is not known is left out."""
    known_only_as_parent = img.source == "parent"
    target = json_text(img.target) if img.target else json_text(img.argv0)
    args = [target, *(json_text(a) for a in img.args)]
    process: dict[str, Any] = {
        "pid": img.pid,
        "name": os.path.basename(target) or img.command,
        "executable": target,
        "args": args,
        "args_count": len(args),
        "command_line": quote_argv([img.target or img.argv0, *img.args]),
        "entity_id": entity_id(img.boot_id, img.pid, img.start),
        "parent": {} if img.ppid is None else {"pid": img.ppid},
    }
    if known_only_as_parent:
        del process["executable"]  # argv[0] as its child saw it, not a path that ran
    if img.cwd and not img.cwd_unknown:
        process["working_directory"] = json_text(img.cwd)
    base = anchor(img.boot_id) if img.start is not None else None
    if base is not None and img.start is not None:
        started = datetime.fromtimestamp(base, timezone.utc) + timedelta(
            seconds=img.start / CLK_TCK
        )
        process["start"] = _ts(started)
    if img.parent_start is not None and img.ppid is not None:
        process["parent"]["entity_id"] = entity_id(img.boot_id, img.ppid, img.parent_start)
    if img.parent_argv:  # the shell's argv, as its first shimmed child kept it
        process["parent"]["args"] = [json_text(a) for a in img.parent_argv]
        process["parent"]["command_line"] = quote_argv(img.parent_argv)
    elif img.parent_cmdline:
        process["parent"]["command_line"] = json_text(img.parent_cmdline)
    if not process["parent"]:
        del process["parent"]
    stamp = process.get("start") if known_only_as_parent else _ts(img.time)
    doc: dict[str, Any] = {
        "@timestamp": stamp or _ts(img.time) or process.get("start"),
        "event": {
            "kind": "event",
            "category": ["process"],
            "type": ["info"] if known_only_as_parent else ["start"],
            "module": "mcpshim",
            "dataset": "mcpshim.exec",
        },
        "process": process,
        "host": {"boot": {"id": img.boot_id}},
        "labels": {
            "mcpshim_shim": img.command if img.source == "shim" else "",
            "mcpshim_session": img.session,
            "mcpshim_source": img.source,
        },
    }
    if known_only_as_parent:
        doc["message"] = "known only as the parent of a shimmed process: no exec of it seen"
    if user_id is not None:
        doc["user"] = {"id": str(user_id)}
    return {k: v for k, v in doc.items() if v is not None}


def ecs_fork_doc(
    img: Image, anchor: Callable[[str], float | None], user_id: int | None = None
) -> dict[str, Any]:
    """A process that never exec'd (a `trace-fork`: a zygote's renderer, a worker) as an
    ECS process event of its own dataset (`mcpshim.process`: no exec, so no exec count
    includes it): its identity, parent, start and end, and what the sampler saw it run."""
    process: dict[str, Any] = {
        "pid": img.pid,
        "entity_id": entity_id(img.boot_id, img.pid, img.start),
    }
    if img.argv0:  # what the sampler saw of its command line (a title it gave itself)
        seen = [json_text(img.argv0), *(json_text(a) for a in img.args)]
        line = quote_argv([img.argv0, *img.args])
        process.update(name=img.command or os.path.basename(seen[0]), args=seen,
                       args_count=len(seen), command_line=line)  # fmt: skip
    if img.ppid is not None:
        process["parent"] = {"pid": img.ppid}
        if img.parent_start is not None:
            process["parent"]["entity_id"] = entity_id(img.boot_id, img.ppid, img.parent_start)
    if img.cwd:
        process["working_directory"] = json_text(img.cwd)
    base = anchor(img.boot_id) if img.start is not None else None
    if base is not None and img.start is not None:
        started = datetime.fromtimestamp(base, timezone.utc) + timedelta(
            seconds=img.start / CLK_TCK
        )
        process["start"] = _ts(started)
    doc: dict[str, Any] = {
        "@timestamp": _ts(img.time) or process.get("start"),
        "event": {
            "kind": "event",
            "category": ["process"],
            "type": ["info"],
            "module": "mcpshim",
            "dataset": "mcpshim.process",
        },
        "process": process,
        "host": {"boot": {"id": img.boot_id}},
        "labels": {"mcpshim_session": img.session, "mcpshim_source": img.source},
        "message": "forked, never exec'd: it runs its parent's program",
    }
    if user_id is not None:
        doc["user"] = {"id": str(user_id)}
    return {k: v for k, v in doc.items() if v is not None}


def _endpoint(address: bytes | None, port: int | None, family: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if address is not None:
        text = json_text(address)
        out["ip" if family in ("inet", "inet6") else "address"] = text
    if port is not None:
        out["port"] = port
    return out


def ecs_net_doc(n: NetRecord, user_id: int | None = None) -> dict[str, Any]:
    """One traced socket call as an ECS network event. The far end is `destination`
    (connect, send), `source` (accept: who came in, with `destination.port` the local
    one) or `server` (listen, bind: its own address)."""
    outcome = (
        "success" if n.outcome in _SUCCESS else "unknown" if n.outcome in _UNKNOWN else "failure"
    )
    event: dict[str, Any] = {
        "kind": "event",
        "category": ["network"],
        "type": ["start"] if n.call in ("listen", "bind") else ["connection"],
        "action": n.call,
        "outcome": outcome,
        "module": "mcpshim",
        "dataset": "mcpshim.net",
    }
    network: dict[str, Any] = {"type": {"inet": "ipv4", "inet6": "ipv6"}.get(n.family, n.family)}
    if n.family in ("inet", "inet6") and n.transport:
        network["transport"] = n.transport
    if n.purpose == "dns":
        network["protocol"] = "dns"
    doc: dict[str, Any] = {
        "@timestamp": _ts(n.time),
        "message": phrase(n),
        "event": event,
        "network": network,
        "process": {"pid": n.pid, "entity_id": entity_id(n.boot_id, n.pid, n.start)},
        "host": {"boot": {"id": n.boot_id}},
        "labels": {
            "mcpshim_session": n.session or "",
            "mcpshim_source": "trace",
            "mcpshim_net_kind": kind_of(n),
            "mcpshim_net_outcome": n.outcome,
            "mcpshim_destination": destination(n),
        },
    }
    far = _endpoint(n.address, n.port, n.family)
    if n.call == "accept":
        doc["source"] = far
        if n.local_port is not None:
            doc["destination"] = {"port": n.local_port}
    elif n.call in ("listen", "bind"):
        doc["server"] = far
    else:
        doc["destination"] = far
    if n.errno:
        doc["error"] = {"code": n.errno}
    if n.queries:
        q = n.queries[0]
        doc["dns"] = {"question": {"name": json_text(q.name), "type": q.type}}
    if n.count > 1:
        doc["labels"]["mcpshim_count"] = str(n.count)
    if user_id is not None:
        doc["user"] = {"id": str(user_id)}
    return doc


def ecs_file_doc(f: FileRecord, user_id: int | None = None) -> dict[str, Any]:
    """One file fact as an ECS file event on its process's entity id: `file.path`, what
    the call did (`event.action`: the syscall; `message`: the words review uses) and the
    table's label (`labels.mcpshim_file_kind`, `_credential`, `_persistence`)."""
    path = json_text(f.path) if f.path is not None else None
    file: dict[str, Any] = {"path": path, "name": os.path.basename(path) if path else None}
    doc: dict[str, Any] = {
        "@timestamp": _ts(f.time),
        "message": filefacts.phrase(f),
        "event": {
            "kind": "event",
            "category": ["file"],
            "type": [_FILE_TYPES.get(f.change, "change")],
            "action": f.call,
            "outcome": "success" if f.ok else "failure",
            "module": "mcpshim",
            "dataset": "mcpshim.file",
        },
        "file": {k: v for k, v in file.items() if v is not None},
        "process": {"pid": f.pid, "entity_id": entity_id(f.boot_id, f.pid, f.start)},
        "host": {"boot": {"id": f.boot_id}},
        "labels": {
            "mcpshim_session": f.session or "",
            "mcpshim_source": "trace",
            "mcpshim_file_kind": filefacts.kind_of(f),
            "mcpshim_file_change": f.change,
        },
    }
    for key, value in (("mcpshim_credential", f.credential), ("mcpshim_persistence", f.persistence),
                       ("mcpshim_blocked", f.blocked)):  # fmt: skip
        if value:
            doc["labels"][key] = value
    if f.written is not None:
        doc["labels"]["mcpshim_written_by"] = entity_id(f.boot_id, f.written.pid, f.written.start)
    if not f.ok:
        doc["error"] = {"code": f.result}
    if user_id is not None:
        doc["user"] = {"id": str(user_id)}
    return doc
