"""Precision and recall of review's findings over the labelled corpus (tests/corpus).

Every scenario is a real session: a real MCP server (five third-party ones, pinned and
installed by the test setup: @cyanheads/git-mcp-server, @modelcontextprotocol/server-filesystem,
@djankies/vitest-mcp with vitest and @agent-infra/mcp-server-commands from npm, mcp-shell-server
from PyPI; the project's own fixture servers; an attack server) under `mcpshim run --mcp`
with shims installed, driven by the official SDK's client, with and without --trace. Its
findings are compared with
what a careful reviewer says is true of it (the scenario's expected findings, by rule id,
severity and tool call). Printed per scenario and in total, at >= medium: true positives,
false positives, false negatives; below medium, statements nobody expected; for attacks,
whether each finding sits under the tool call that did it. Traced, every network statement
must be one the kernel showed (harness.network_problems: a call's "reached the network"
from observed connections, no guess from names at >= medium, an attack's connection to the
listener found by its observed connect).

    python benchmarks/findings_quality.py [--only NAME] [--no-trace] [--verbose]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.corpus.harness import (
    SEVERITIES,
    Outcome,
    UnavailableError,
    network_problems,
    run_scenario,
    score,
)
from tests.corpus.scenarios import ALL

from throwaway import throwaway_home


def _fmt_row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(
        c.ljust(w) if i == 0 else c.rjust(w)
        for i, (c, w) in enumerate(zip(cells, widths, strict=False))
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="scenarios whose name contains this")
    ap.add_argument("--no-trace", action="store_true", help="skip the --trace variants")
    ap.add_argument("--verbose", "-v", action="store_true", help="list each miss and extra")
    a = ap.parse_args()
    t0 = time.monotonic()
    rows: list[list[str]] = []
    total = {"tp": 0, "fp": 0, "fn": 0, "low": 0, "placed": 0, "attacks": 0}
    details: list[str] = []
    for sc in ALL:
        if a.only and a.only not in sc.name:
            continue
        for trace in sc.traced:
            if trace and a.no_trace:
                continue
            label = f"{sc.name}{' --trace' if trace else ''}"
            try:
                out: Outcome = run_scenario(sc, trace)
            except UnavailableError as exc:
                rows.append([label, sc.kind, "skip", "", "", "", "", ""])
                details.append(f"{label}: skipped: {exc}")
                continue
            s = score(out)
            placed = sum(1 for _, ok in s.placed if ok)
            total["tp"] += s.tp
            total["fp"] += s.fp
            total["fn"] += s.fn
            total["low"] += len(s.false_low)
            total["placed"] += placed
            total["attacks"] += len(s.placed)
            under = f"{placed}/{len(s.placed)}" if s.placed else "-"
            net = network_problems(out)  # traced: a network statement the kernel did not show
            ok = "ok" if not (s.fp or s.fn or s.false_low or out.problems or net) else "WRONG"
            rows.append([label, sc.kind, str(s.tp), str(s.fp), str(s.fn),
                         str(len(s.false_low)), under, f"{out.seconds:.1f}s {ok}"])  # fmt: skip
            for e in s.missed:
                details.append(f"{label}: missed {e.rule} {e.severity} under {e.tool}")
            for g in s.extra + s.false_low:
                details.append(f"{label}: unexpected {g.rule} {g.severity} under {g.tool}: "
                               f"{g.message[:140]}")  # fmt: skip
            for p in net:
                details.append(f"{label}: network said without the kernel: {p}")
            for p in out.problems + out.call_errors:
                details.append(f"{label}: scenario problem: {p}")
    head = ["scenario", "kind", "TP", "FP", "FN", "false<med", "under call", "time"]
    rows.append(["TOTAL", "", str(total["tp"]), str(total["fp"]), str(total["fn"]),
                 str(total["low"]), f"{total['placed']}/{total['attacks']}",
                 f"{time.monotonic() - t0:.0f}s"])  # fmt: skip
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print(f"findings at >= {SEVERITIES[2]}: TP found as expected (rule, severity, tool call), "
          "FP said but not true, FN true but not said; false<med: statements below medium "
          "nobody expected; under call: attack findings under the call that did it")  # fmt: skip
    print(_fmt_row(head, widths))
    for r in rows:
        print(_fmt_row(r, widths))
    tp, fp, fn = total["tp"], total["fp"], total["fn"]
    prec = tp / (tp + fp) if tp + fp else 1.0
    rec = tp / (tp + fn) if tp + fn else 1.0
    print(f"precision {prec:.2f}  recall {rec:.2f}")
    if details and (True):
        print()
        print("\n".join(details))
    return 0


if __name__ == "__main__":
    throwaway_home()
    sys.exit(main())
