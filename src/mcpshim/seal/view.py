"""What `log verify` and `log anchors` print, and the one line review, tree and report put
in their header. Everything from the log goes through display.escape."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from mcpshim.base.display import escape
from mcpshim.seal.anchors import Anchor
from mcpshim.seal.verify import Problem, Verification

__all__ = ["anchors_json", "anchors_text", "header_line", "verification_json", "verification_text"]

SCHEMA = "mcpshim.verify/1"


def _secs(s: float | None) -> str:
    if s is None:
        return "?"
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


def _problem_lines(p: Problem) -> list[str]:
    lines = [f"{p.kind} {escape(p.where)}: {escape(p.message)}"]
    for r in p.records:
        sess = f" session {escape(r.session)}" if r.session else ""
        lines.append(f"    {escape(r.where)} {escape(r.kind)}{sess} {escape(r.time)}".rstrip())
    if p.record_count > len(p.records):
        lines.append(f"    ... {p.record_count - len(p.records)} more record(s)")
    return lines


def verification_text(v: Verification, log: str) -> str:
    last = v.last
    out = [
        f"log: {escape(log)} ({len(v.scans)} segment(s), {len(v.chain)} seal(s))",
        f"verdict: {v.verdict.upper()}" + (f", {len(v.problems)} problem(s)" if v.problems else ""),
    ]
    if v.keyed:
        out.append(f"keys: every seal checked with your verifier ({', '.join(v.key_ids)})")
    elif v.chain:
        out.append(
            "keys: not checked (no --key): a chain recomputed from scratch would pass; "
            "give the verifier to catch it"
        )
    if v.anchors_checked:
        through = "none" if v.anchored_through is None else f"seal {v.anchored_through}"
        out.append(f"anchors: {v.anchors_checked} read back; matching through {through}")
    w = v.window
    if w.seals > 1:
        out.append(
            f"window: a seal every {_secs(w.mean_s)} on average, the longest interval "
            f"{_secs(w.longest_s)} (after seal {w.longest_after})"
        )
    if last is not None:
        out.append(
            f"last seal: {last.seal.n} at {escape(last.where)}, {escape(last.seal.time)} "
            f"({_secs(w.since_last_s)} ago)"
        )
    if w.unsealed_records:
        out.append(
            f"unsealed: {w.unsealed_records} record(s) from {escape(w.unsealed_from)} on, "
            "written after the last seal (not protected yet)"
        )
    for p in v.problems:
        out.extend(_problem_lines(p))
    out.extend(f"note: {escape(n)}" for n in v.notes)
    return "\n".join(out) + "\n"


def verification_json(v: Verification, log: str) -> dict[str, Any]:
    last = v.last
    return {
        "schema": SCHEMA,
        "log": log,
        "verdict": v.verdict,
        "keyed": v.keyed,
        "keys": list(v.key_ids),
        "seals": len(v.chain),
        "last_seal": None
        if last is None
        else {"n": last.seal.n, "where": last.where, "time": last.seal.time, "head": last.head},
        "anchors": {"checked": v.anchors_checked, "through": v.anchored_through},
        "window": asdict(v.window),
        "segments": [
            {
                "name": s.name,
                "size": s.size,
                "seals": len(s.seals),
                "segment": s.seals[0].seal.segment if s.seals else None,
                "sealed": [[a, b] for a, b, _ in s.verified],
                "unsealed": [s.tail, s.size] if s.tail < s.size else None,
            }
            for s in v.scans
        ],
        "problems": [
            {
                "kind": p.kind,
                "where": p.where,
                "message": p.message,
                "seals": list(p.seals),
                "record_count": p.record_count,
                "records": [asdict(r) for r in p.records],
            }
            for p in v.problems
        ],
        "notes": list(v.notes),
    }


def header_line(v: Verification) -> str:
    """The `sealed:` line of review, tree and report."""
    last = v.last
    if last is None:
        return "no: the log was never sealed (`mcpshim log seal --init`)"
    if v.verdict == "tampered":
        first = next(p for p in v.problems if p.kind not in ("no-anchors",))
        more = f" (+{len(v.problems) - 1} more)" if len(v.problems) > 1 else ""
        return f"TAMPERED: {first.kind} {first.where}{more}; see `mcpshim log verify`"
    unsealed = v.window.unsealed_records
    tail = f"; {unsealed} record(s) after it unsealed" if unsealed else ""
    what = "verified" if v.verdict == "verified" else f"GAPS ({v.problems[0].kind})"
    key = "" if v.keyed else " (plain chain)"
    return f"{what}{key} through seal {last.seal.n} at {last.seal.time}{tail}"


def anchors_text(found: Sequence[Anchor]) -> str:
    lines = [f"{len(found)} anchor(s)"]
    for a in found:
        lines.append(
            f"{escape(a.time)} seal {a.n} head {a.head[:16]} segment {a.segment} end {a.end} "
            f"key {escape(a.key)} log {escape(a.log)}"
        )
    return "\n".join(lines) + "\n"


def anchors_json(found: Sequence[Anchor]) -> dict[str, Any]:
    return {"schema": "mcpshim.anchors/1", "anchors": [asdict(a) for a in found]}
