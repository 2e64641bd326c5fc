"""The compatibility table (issue 38, item 7): per server of the corpus, what a user who
puts it under mcpshim gets. Written by `benchmarks/findings_quality.py --compat FILE`.

For each server: what its benign sessions show at >= medium at the default threshold (each
a labelled true finding), whether its attacks are found under the call that did them, and,
for one benign scenario of it, in one world: the session run directly (no mcpshim) and
traced (the cost), approved (`approve`), run again identically and in another call order
where the corpus has one, each reviewed against the lock (nothing at >= medium is the
mark), and run under `--lock --contain` (its calls must still succeed).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tests.corpus.harness import (
    SEVERITIES,
    Call,
    Outcome,
    Scenario,
    mcpshim,
    need,
    prepare,
    score,
    session_in,
    workspace,
)

__all__ = ["REORDERED", "Row", "lock_rerun", "reordered", "rows", "server_of", "table"]

#: a benign scenario and another order of the same calls: reversed, or one tool's first
#: call moved to the front (browser_snapshot launches the browser on a blank page, so the
#: page is loaded by a call that did not start it). Another scenario of the corpus calls
#: other tools or arguments (the tabs-first one opens its page from browser_tabs), which
#: is new behaviour for those tools, not another order.
REORDERED = {
    "benign-playwright": "first:browser_snapshot",
    "benign-mcp-server-git": "reversed",
}


def _moved(calls: list[Call], how: str) -> list[Call]:
    if how == "reversed":
        return list(reversed(calls))
    tool = how.removeprefix("first:")
    at = next(i for i, (name, _args) in enumerate(calls) if name == tool)
    return [calls[at], *calls[:at], *calls[at + 1 :]]


def reordered(sc: Scenario) -> Scenario | None:
    """The other order REORDERED names for `sc`, if any."""
    how = REORDERED.get(sc.name)
    if how is None:
        return None
    return replace(sc, name=f"{sc.name}-{how.replace(':', '-')}",
                   calls=lambda w: _moved(list(sc.calls(w)), how))  # fmt: skip


def server_of(sc: Scenario) -> str:
    """The server a scenario drives, with its version, as its summary names it."""
    head, sep, _rest = sc.summary.partition(": ")
    if sep and (any(c.isdigit() for c in head) or "/" in head):
        return head
    return "the project's attack server (tests/corpus/attack_server.py)"


@dataclass
class LockRun:
    """One benign scenario approved, rerun and contained in one world."""

    direct_s: float = 0.0
    traced_s: float = 0.0
    identical: list[str] = field(default_factory=list)  # findings >= medium against the lock
    reordered: list[str] | None = None  # None: the corpus has no other order
    contained: str = ""


def _departures(w: Any, session: str, lock: str) -> list[str]:
    done = mcpshim(w, "review", "--session", session, "--lock", lock, "--format", "json")
    doc = json.loads(done.stdout)
    return [f"{f['rule']} {f['severity']}: {f['message'][:80]}" for f in doc["findings"]
            if SEVERITIES.index(f["severity"]) >= 2]  # fmt: skip


def lock_rerun(sc: Scenario, other: Scenario | None) -> LockRun:
    need(*sc.needs, "strace")
    out = LockRun()
    with workspace(f"{sc.name}-lock") as w:
        prepare(w, sc)
        _none, _errors, out.direct_s = session_in(w, sc, None)
        first, _errors, out.traced_s = session_in(w, sc, True)
        lock = str(w.root / "mcpshim.lock")
        done = mcpshim(w, "approve", "--session", first, "--lock", lock, "--yes")
        if done.returncode != 0:
            out.contained = f"approve failed: {done.stderr.strip()[:120]}"
            return out
        again, _errors, _took = session_in(w, sc, True)
        out.identical = _departures(w, again, lock)
        if other is not None:
            moved, _errors, _took = session_in(w, other, True)
            out.reordered = _departures(w, moved, lock)
        _session, errors, _took = session_in(w, sc, True, ("--lock", lock, "--contain"))
        out.contained = "its calls ran" if not errors else f"{len(errors)} call(s) failed"
    return out


@dataclass
class Row:
    server: str
    scenarios: list[str] = field(default_factory=list)
    benign_alarms: dict[str, int] = field(default_factory=dict)  # rule id -> findings
    placed: int = 0
    attacks: int = 0
    wrong: list[str] = field(default_factory=list)
    lock: LockRun | None = None


def rows(outcomes: Iterable[Outcome]) -> dict[str, Row]:
    """The per-server part of the table from the corpus's own runs (traced ones)."""
    out: dict[str, Row] = {}
    for o in outcomes:
        row = out.setdefault(server_of(o.scenario), Row(server_of(o.scenario)))
        row.scenarios.append(o.label)
        s = score(o)
        if s.wrong:
            row.wrong.append(o.label)
        if not o.trace:
            continue
        row.placed += sum(1 for _e, ok in s.placed if ok)
        row.attacks += len(s.placed)
        if o.scenario.kind == "benign":
            for g in o.got:
                if g.rank >= 2:
                    key = f"{g.rule} {g.severity}"
                    row.benign_alarms[key] = row.benign_alarms.get(key, 0) + 1
    return out


def _said(items: Sequence[str] | None) -> str:
    if items is None:
        return "-"
    return "clean" if not items else f"{len(items)} at >= medium"


def table(found: dict[str, Row]) -> str:
    """The Markdown table docs/compatibility.md holds."""
    head = ("| server | benign at >= medium (traced, each labelled true) | attacks under their "
            "call | lock rerun: identical / reordered | `--contain` | traced / direct wall "
            "(one run) | scorer |\n| --- | --- | --- | --- | --- | --- | --- |")  # fmt: skip
    lines = [head]
    for row in sorted(found.values(), key=lambda r: r.server.lower()):
        alarms = ", ".join(f"{k} x{n}" for k, n in sorted(row.benign_alarms.items())) or "none"
        attacks = f"{row.placed}/{row.attacks}" if row.attacks else "-"
        lk = row.lock
        rerun = f"{_said(lk.identical)} / {_said(lk.reordered)}" if lk else "-"
        contained = lk.contained if lk else "-"
        cost = f"x{lk.traced_s / lk.direct_s:.2f}" if lk and lk.direct_s else "-"
        verdict = "ok" if not row.wrong else "wrong: " + ", ".join(row.wrong)
        lines.append(f"| {row.server} | {alarms} | {attacks} | {rerun} | {contained} | "
                     f"{cost} | {verdict} |")  # fmt: skip
    return "\n".join(lines) + "\n"
