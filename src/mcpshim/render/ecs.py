"""`log --format ecs`: one Elastic Common Schema document per exec of the process model.

Each exec once (family.model), whichever sources saw it: a shim's exec is one document
(its hop is part of it), a traced exec no shim saw is one too, a sample of a traced
process is none, so a shipper counts what `tree`, `review` and `sessions` count.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from mcpshim.base.display import json_text, quote_argv
from mcpshim.family.images import Image
from mcpshim.log.execlog import CLK_TCK
from mcpshim.log.logview import entity_id

__all__ = ["ecs_doc"]


def _ts(t: datetime | None) -> str | None:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" if t else None


def ecs_doc(
    img: Image, anchor: Callable[[str], float | None], user_id: int | None = None
) -> dict[str, Any]:
    """One exec as an ECS process-start event (`anchor`: boot time by boot id)."""
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
        "parent": {"pid": img.ppid},
    }
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
    doc: dict[str, Any] = {
        "@timestamp": _ts(img.time) or process.get("start"),
        "event": {
            "kind": "event",
            "category": ["process"],
            "type": ["start"],
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
    if user_id is not None:
        doc["user"] = {"id": str(user_id)}
    return doc
