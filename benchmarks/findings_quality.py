"""Precision and recall of review's findings over the labelled corpus (tests/corpus).

Every scenario is a real session: a real MCP server (twelve third-party ones of eight kinds,
pinned and installed by the test setup: from npm @cyanheads/git-mcp-server (git),
@modelcontextprotocol/server-filesystem (files), @djankies/vitest-mcp with vitest (test
runner), @agent-infra/mcp-server-commands (commands), @playwright/mcp with Debian's chromium
(browser), cclsp with typescript-language-server (language server); from PyPI mcp-shell-server
and cli-mcp-server (commands), terminal-mcp (persistent terminal), mcp-server-fetch (in-process
fetcher), mcp-pytest-runner with pytest (test runner), mcp-server-git (git, GitPython); the
project's own fixture servers; an attack server) under `mcpshim run --mcp` with shims
installed, driven by the official SDK's client, with and without --trace. Its findings are
compared with what a careful reviewer says is true of it (the scenario's expected findings, by
rule id, severity and tool call). Printed per scenario and in total, at >= medium: true
positives, false positives, false negatives; below medium, statements nobody expected; for
attacks, whether each finding sits under the tool call that did it. Traced, every network
statement must be one the kernel showed (harness.network_problems: a call's "reached the
network" from observed connections, no guess from names at >= medium, an attack's connection to
the listener found by its observed connect).

    python benchmarks/findings_quality.py [--only NAME] [--no-trace] [--verbose]
        [--before DIR] [--compat FILE]

`--before DIR` (another checkout's root) has its review read every session too and prints
each scenario's score before and after: the same sessions, only the review differs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.corpus import compat
from tests.corpus.harness import (
    SEVERITIES,
    Outcome,
    Scenario,
    UnavailableError,
    block_problems,
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
    ap.add_argument(
        "--compat",
        metavar="FILE",
        help="also approve, rerun and contain one "
        "benign scenario per server, and write the compatibility table to FILE",
    )
    ap.add_argument(
        "--before",
        metavar="DIR",
        type=Path,
        help="another checkout's root (e.g. a `git archive` of an older commit): its review "
        "also reads every session, and a table gives each scenario's score before and after",
    )
    a = ap.parse_args()
    if a.before is not None and not (a.before / "src" / "mcpshim").is_dir():
        print(f"--before {a.before}: no src/mcpshim there", file=sys.stderr)
        return 2
    chosen = [sc for sc in ALL if not a.only or a.only in sc.name]
    if not chosen:
        print(f"no scenario matches {a.only!r}: nothing to score", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    rows: list[list[str]] = []
    total = {"tp": 0, "fp": 0, "fn": 0, "low": 0, "placed": 0, "attacks": 0, "alarms": 0}
    details: list[str] = []
    skipped = wrong = 0
    outcomes: list[Outcome] = []
    for sc in chosen:
        for trace in sc.traced:
            if trace and a.no_trace:
                continue
            label = f"{sc.name}{' --trace' if trace else ''}"
            try:
                out: Outcome = run_scenario(sc, trace, a.before)
            except UnavailableError as exc:
                rows.append([label, sc.kind, "skip", "", "", "", "", "", ""])
                details.append(f"{label}: skipped: {exc}")
                skipped += 1
                continue
            outcomes.append(out)
            s = score(out)
            placed = sum(1 for _, ok in s.placed if ok)
            total["tp"] += s.tp
            total["fp"] += s.fp
            total["fn"] += s.fn
            total["low"] += len(s.false_low)
            total["placed"] += placed
            total["attacks"] += len(s.placed)
            total["alarms"] += s.benign_alarms
            under = f"{placed}/{len(s.placed)}" if s.placed else "-"
            net = network_problems(out)  # traced: a network statement the kernel did not show
            net += block_problems(out)  # a call's block that contradicts its findings
            net += out.readers  # text, report or cards filing a fact unlike review's JSON
            bad = s.wrong or bool(out.problems or net)
            bad = bad or placed < len(s.placed) or len(set(out.counts.values())) != 1
            wrong += bad
            alarms = str(s.benign_alarms) if sc.kind == "benign" else "-"
            rows.append([label, sc.kind, str(s.tp), str(s.fp), str(s.fn),
                         str(len(s.false_low)), alarms, under,
                         f"{out.seconds:.1f}s {'WRONG' if bad else 'ok'}"])  # fmt: skip
            for e in s.missed:
                details.append(f"{label}: missed {e.label()}")
            for g in s.extra + s.false_low:
                details.append(f"{label}: unexpected {g.label()}")
            for p in s.labels:
                details.append(f"{label}: expectation cannot be judged: {p}")
            for p in net:
                details.append(f"{label}: network said without the kernel: {p}")
            for p in out.problems + out.call_errors:
                details.append(f"{label}: scenario problem: {p}")
            if len(set(out.counts.values())) != 1:
                details.append(f"{label}: readers count execs differently: {out.counts}")
    head = ["scenario", "kind", "TP", "FP", "FN", "false<med", "benign>=med", "under call",
            "time"]  # fmt: skip
    rows.append(["TOTAL", "", str(total["tp"]), str(total["fp"]), str(total["fn"]),
                 str(total["low"]), str(total["alarms"]),
                 f"{total['placed']}/{total['attacks']}",
                 f"{time.monotonic() - t0:.0f}s"])  # fmt: skip
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print(f"findings at >= {SEVERITIES[2]}: TP found as expected (rule, severity, tool call, "
          "what it names), FP said but not true (duplicates included), FN true but not said; "
          "false<med: statements below medium nobody expected; benign>=med: what a CI gate "
          "fails a benign session on (true or not); under call: attack findings under the "
          "call that did it")  # fmt: skip
    print(_fmt_row(head, widths))
    for r in rows:
        print(_fmt_row(r, widths))
    if details:
        print()
        print("\n".join(details))
    if skipped:
        print(f"\n{skipped} run(s) skipped: no precision or recall over a partial corpus",
              file=sys.stderr)  # fmt: skip
        return 2
    tp, fp, fn = total["tp"], total["fp"], total["fn"]
    prec = f"{tp / (tp + fp):.2f}" if tp + fp else "n/a"
    rec = f"{tp / (tp + fn):.2f}" if tp + fn else "n/a"
    print(f"precision {prec} ({tp} of {tp + fp})  recall {rec} ({tp} of {tp + fn})  "
          f"benign alarms {total['alarms']}  wrong rows {wrong}")  # fmt: skip
    if a.before is not None:
        print_before_after(a.before, outcomes)
    if a.compat:
        write_compat(Path(a.compat), outcomes, chosen)
    return 1 if wrong else 0


def print_before_after(before: Path, outcomes: list[Outcome]) -> None:
    """Each session's score by the other checkout's review and by this one's, side by side
    (the same sessions: only the review differs)."""
    keys = ("TP", "FP", "FN", "false<med", "benign>=med")
    sums = {k: [0, 0] for k in keys}
    rows: list[list[str]] = []
    for out in outcomes:
        if not isinstance(out.before, list):
            rows.append([out.label, f"before: {out.before}"])
            continue
        cells = [out.label]
        for k, (b, n) in zip(keys, _pair(out), strict=True):
            sums[k][0] += b
            sums[k][1] += n
            cells.append(f"{b}->{n}" if b != n else str(n))
        rows.append(cells)
    rows.append(["TOTAL", *(f"{b}->{n}" if b != n else str(n) for b, n in sums.values())])
    head = ["scenario (before -> after)", *keys]
    widths = [max(len(r[i]) for r in [head, *rows] if i < len(r)) for i in range(len(head))]
    print(f"\nthe same sessions reviewed by {before} (before) and by this checkout (after):")
    for r in [head, *rows]:
        print(_fmt_row(r, widths))


def _pair(out: Outcome) -> list[tuple[int, int]]:
    b = score(replace(out, got=out.before if isinstance(out.before, list) else []))
    n = score(out)
    alarms = out.scenario.kind == "benign"
    return [(b.tp, n.tp), (b.fp, n.fp), (b.fn, n.fn), (len(b.false_low), len(n.false_low)),
            (b.benign_alarms if alarms else 0, n.benign_alarms if alarms else 0)]  # fmt: skip


def write_compat(path: Path, outcomes: list[Outcome], chosen: list[Scenario]) -> None:
    """docs/compatibility.md: the table, and how it was made."""
    found = compat.rows(outcomes)
    done: set[str] = set()
    for sc in chosen:  # one benign scenario per server, one with another order first
        server = compat.server_of(sc)
        if sc.kind != "benign" or server in done or server not in found:
            continue
        if (
            any(
                compat.server_of(o) == server and o.name in compat.REORDERED
                for o in chosen
                if o.name != sc.name
            )
            and sc.name not in compat.REORDERED
        ):
            continue  # its sibling with another call order is the one approved
        other = compat.reordered(sc)
        print(f"lock rerun and --contain: {sc.name}", file=sys.stderr)
        try:
            found[server].lock = compat.lock_rerun(sc, other)
        except UnavailableError as exc:
            print(f"  skipped: {exc}", file=sys.stderr)
        done.add(server)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=False).stdout.strip()  # fmt: skip
    load = os.getloadavg()[0]
    path.write_text(
        "# Compatibility: the corpus's servers under mcpshim\n\n"
        "Written by `python benchmarks/findings_quality.py --compat docs/compatibility.md` "
        f"at {head} (load {load:.1f} when it ended; 2 cores). Each row is a pinned "
        "third-party server (or one of the project's fixtures) the corpus drives with the "
        "official SDK's client, traced and untraced (tests/corpus/scenarios). The lock "
        "columns come from one benign scenario of the server: approved, run again "
        "identically and in another call order where the corpus has one, each reviewed "
        "against the lock; then run under `--lock --contain`. The cost is one traced run "
        "against one direct run in the same world (benchmarks/heavy_family.py measures it "
        "properly for the browser). The rubric is docs/verdicts.md.\n\n" + compat.table(found)
    )
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    throwaway_home()
    sys.exit(main())
