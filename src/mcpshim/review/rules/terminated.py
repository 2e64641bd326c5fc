"""MCS537 in every view: `run --on-departure terminate` ended the family, said under the
tool call whose process departed.

The `departure` record (supervise.departwatch) names the process (pid, start, boot id) and
the time, so review files the finding like any finding about a process: under the call
that started it, or, for the server's own exec, under the call in flight then. A plain
`review` says it (session_rules), and `review --lock` the same finding, placed by its
attribution (review.departures).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcpshim.base.display import escape
from mcpshim.review.departure_rules import TERMINATED
from mcpshim.review.findings import Evidence, Finding

__all__ = ["terminated_finding"]


def terminated_finding(sid: str, d: Mapping[str, Any], where: str) -> Finding:
    """The finding of one `departure` record (`where`: its place in the log)."""
    what, path = escape(str(d.get("what"))), escape(str(d.get("path")))
    text = f"[departure] {d.get('time', '?')} pid {d.get('pid')}: {what}: {path}"
    argv = d.get("argv")
    if isinstance(argv, list):
        text += " " + escape(" ".join(str(a) for a in argv))
    data = {k: d.get(k) for k in ("pid", "start", "boot_id") if k in d}
    data.update(command=path.rsplit("/", 1)[-1], path=path)
    data["at"] = d.get("time")  # the server's own exec: under the call in flight then
    msg = f"the family was terminated at a departure: {what} {path}"
    return Finding(TERMINATED, msg, (Evidence(where, text, data),), f"session {sid}", key=path)
