"""tree, review, rules, policy init, baseline save."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from mcpshim.base.display import escape
from mcpshim.cli.common import (
    LOCK_LOOKUP,
    fail_on_option,
    findings_exit,
    format_option,
    load_policy,
    location_options,
    locations,
    lock_option,
    mark_reviewed,
    resolve_lock,
    session_option,
)
from mcpshim.cli.common import session as resolve
from mcpshim.cli.output import write_output
from mcpshim.errors import UsageError
from mcpshim.log import execlog, marks
from mcpshim.paths import Locations, default_identity_cache

if TYPE_CHECKING:
    from mcpshim.review import policy
from mcpshim.render.formats import (
    FINDINGS_FORMATS,
    TREE_FORMATS,
    findings_renderer,
    tree_renderer,
)

__all__ = ["COMMANDS"]


def _problems_to_stderr(problems: list[execlog.LogProblem]) -> None:
    for p in problems:
        click.echo(f"mcpshim: {escape(p.where)}: {escape(p.message)}; skipped", err=True)


class _Progress:
    """A one-line progress indicator on stderr, only when stderr is a terminal."""

    def __init__(self, loc: Locations) -> None:
        self.sizes = {p.name: p.stat().st_size for p in execlog.segments(loc)}
        self.total = sum(self.sizes.values()) or 1
        names = list(self.sizes)
        self.before = {n: sum(self.sizes[m] for m in names[:i]) for i, n in enumerate(names)}

    def __call__(self, count: int, where: str) -> None:
        if not where:
            click.echo("\r\x1b[K", nl=False, err=True)
            return
        name, _, off = where.partition("@")
        off = off.split(" ", 1)[0]
        done = self.before.get(name, 0) + (int(off) if off.isdigit() else 0)
        pct = min(100, 100 * done // self.total)
        click.echo(f"\rmcpshim: {count:,} records, {pct}%", nl=False, err=True)


def _progress(loc: Locations) -> _Progress | None:
    return _Progress(loc) if sys.stderr.isatty() else None


def _echo(text: str) -> None:
    click.echo(text, nl=False)


@contextlib.contextmanager
def _records(
    loc: Locations, session: str | None
) -> Iterator[tuple[Iterator[execlog.Record], list[execlog.LogProblem]]]:
    from mcpshim.log import scope

    problems: list[execlog.LogProblem] = []
    yield scope.records(loc, session, problems), problems
    _problems_to_stderr(problems)


@click.command("tree")
@location_options
@session_option("Only records of this session (MCPSHIM_SESSION); an unknown one is an error.")
@click.option("--root", "root_pid", type=int, help="Only the subtrees of processes with this pid.")
@format_option(
    *TREE_FORMATS,
    help="text: pstree-like; json: nested, versioned (mcpshim.tree/1); dot: Graphviz.",
)
def tree_(
    shim_dir: Path | None, log_dir: Path | None, session: str | None, root_pid: int | None, fmt: str
) -> None:
    """Rebuild process families from the exec log.

    A process is (boot id, pid, start time), so a reused pid never links unrelated
    processes; a child links to the latest process with its ppid that started before it.
    Several images of one process (sh, then `exec git`) show on one node. A record whose
    parent is not in the log hangs under a "? PID (parent not in log)" node, or, for a
    session's server, under its `mcpshim run` supervisor. Each image is marked with its
    source: [shim] (a shim's record), [observed] (seen by `mcpshim run`'s sampling) or
    [trace...] (seen by its tracer). Times are UTC; cwd shows where it changes; argv is
    escaped. The header's coverage line counts, per session, the execs seen, how many went
    through their shim and how many bypassed it (and why).
    """
    from mcpshim.cli.sealnote import seal_note
    from mcpshim.family.attribution import anchors_for, attribute_log, scoped_collector
    from mcpshim.family.coverage import CoverageCollector
    from mcpshim.family.forestread import read_forest
    from mcpshim.family.view import session_parents
    from mcpshim.log import scope
    from mcpshim.log.rows import ExecRows
    from mcpshim.render.md import render_calls_text
    from mcpshim.render.report import coverage_lines
    from mcpshim.render.text import write_tree_text
    from mcpshim.shim import registry
    from mcpshim.shim.manifest import load_manifest

    loc = locations(shim_dir, log_dir)
    session = resolve(loc, session)
    supervisors: dict[tuple[str, int], str] = {}  # (boot, pid) -> what that process is
    cov = CoverageCollector(session)

    def note(rec: execlog.EventRecord) -> None:
        if rec.kind == "session-start":
            supervisors.update(session_parents(rec.data))

    problems: list[execlog.LogProblem] = []
    rows = ExecRows()
    items = scope.rows(loc, session, rows, problems)
    collector = scoped_collector(loc, session) if fmt == "text" and root_pid is None else None
    if collector is not None:  # the calls' part below, from this one read
        items = collector.tee_rows(items, rows)
    forest, seen = read_forest(items, rows, session, cov, note)
    _problems_to_stderr(problems)
    if not seen and session is not None:
        raise execlog.missing_session(loc, session)
    if root_pid is not None:
        forest = forest.select_pid(root_pid)
    subject = {"log": str(loc.log_file), "session": session or "(all)"}
    if root_pid is not None:
        subject["root"] = str(root_pid)
    sealed = seal_note(loc, session)
    subject["sealed"] = sealed.line
    # Every shim directory mcpshim installed counts, as in review (engine.make_context).
    known = {str(loc.shim_dir): load_manifest(loc.shim_dir), **registry.installed()}
    shims = {name for m in known.values() if m is not None for name in m.shims}
    subject.update(coverage_lines(cov.results(shims, known)))
    if fmt == "text":  # in batches of lines: a large forest never becomes one string
        write_tree_text(forest, subject, _echo, supervisors, sealed.mark)
        atts = collector.results(anchors_for(loc)) if collector else attribute_log(loc, session)
        for att in atts if root_pid is None else []:
            click.echo("\n" + render_calls_text(att), nl=False)  # sessions run with --mcp
        return
    click.echo(tree_renderer(fmt)(forest, subject), nl=False)


def _evidence_limit(value: str) -> str:
    if value != "all" and not (value.isdigit() and int(value) >= 0):
        raise click.BadParameter(f"{value!r}: a number or 'all'")
    return value


@click.command()
@location_options
@session_option("Only records of this session (MCPSHIM_SESSION); an unknown one is an error.")
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML policy (`mcpshim policy init` writes a starter with every key explained).",
)
@click.option(
    "--baseline",
    "baseline_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Report drift against this baseline (`mcpshim baseline save`).",
)
@format_option(
    *FINDINGS_FORMATS,
    help="text: by tool call (sessions run with --mcp) or family, with evidence; json: "
    "versioned envelope (mcpshim.findings/1); sarif: SARIF 2.1.0 for code scanning.",
)
@click.option(
    "--evidence",
    default="3",
    show_default=True,
    callback=lambda _c, _p, v: _evidence_limit(v),
    help="Evidence records the text format prints per finding: a number, or all. JSON and "
    "SARIF always carry every one.",
)
@lock_option("Report only what departs from this approval (`mcpshim approve`); " + LOCK_LOOKUP)
@fail_on_option
def review(
    shim_dir: Path | None,
    log_dir: Path | None,
    session: str | None,
    policy_file: Path | None,
    baseline_file: Path | None,
    fmt: str,
    evidence: str,
    lock_file: str | None,
    fail_on: str,
) -> int:
    """Review the exec log: findings per process family, with the records that prove them.

    For a session run with --mcp, every tool call gets an answer to the questions that
    matter (what ran, from where; was it a new executable path, did it reach the network,
    did it run a command from a file the agent can edit, did anything outlive the call),
    and the findings about what it started are filed under it; routine events are info
    and counted on one line.

    Rules (see `mcpshim rules`): PATH-resolved commands, executables and scripts in temporary
    or writable directories, composed `sh -c` lines, package runners running project
    scripts, network helpers and their destinations, credentials in arguments, targets whose
    hash changed since install, and whatever the policy or baseline does not allow.

    Exit status: 0 when no finding is at or above --fail-on, 1 when one is, 2 on a usage or
    input error (a malformed policy names its file, line and key). The default threshold is
    medium, so routine events (a PATH lookup that reached a pinned shim, a plain `sh -c` of
    one command: info) are reported without failing a CI job.

    With --lock, only departures from the approval are reported, each under its tool call
    (MCS520-MCS537): drifted, new or missing tools, new executables or identities,
    subcommands, cwd roots, destinations, credential names, processes that outlived a call.
    """
    from mcpshim.cli.sealnote import seal_note
    from mcpshim.render.report import Report
    from mcpshim.review import baseline as baseline_mod
    from mcpshim.review import pipeline

    loc = locations(shim_dir, log_dir)
    session = resolve(loc, session)
    pol = load_policy(policy_file)
    lock_path = resolve_lock(lock_file)
    limit = None if evidence == "all" else int(evidence)
    refs = marks.segment_refs(loc)
    if lock_path is not None:
        return _review_lock(loc, session, lock_path, pol, fmt, fail_on, limit, refs)
    base = baseline_mod.load_baseline(baseline_file) if baseline_file else None
    done = pipeline.review_log(
        loc, policy=pol, session=session, baseline=base, progress=_progress(loc)
    )
    _problems_to_stderr(done.problems)
    result = done.result
    # Evidence no verified seal covers is marked.
    sealed = seal_note(loc, session)
    findings = sealed.findings(result.findings)
    mark_reviewed(loc, refs, session, findings)
    subject = {
        "log": str(loc.log_file),
        "session": session or "(all)",
        "policy": pol.source or "(defaults)",
        "baseline": str(baseline_file) if baseline_file else "(none)",
        "records": result.in_session if session is not None else result.records,
        "processes": result.processes,
        "families": result.families,
        "sealed": sealed.line,
    }
    notes = [f"{len(done.problems)} damaged log record(s) skipped"] if done.problems else []
    report = Report(
        "review", subject, findings, notes, done.verdicts, limit, coverage=result.coverage
    )
    click.echo(findings_renderer(fmt)(report), nl=False)
    return findings_exit(findings, fail_on)


def _review_lock(
    loc: Locations,
    session: str | None,
    path: Path,
    pol: policy.Policy,
    fmt: str,
    fail_on: str,
    limit: int | None,
    refs: list[dict[str, Any]],
) -> int:
    from mcpshim.cli.sealnote import seal_note
    from mcpshim.contract.lockfile import load_lock
    from mcpshim.render.report import Report
    from mcpshim.review import held

    kept = default_identity_cache()
    done, sessions = held.lock_review(loc, session, load_lock(path), pol, kept)
    _problems_to_stderr(done.problems)
    sealed = seal_note(loc, session)
    findings = sealed.findings(done.findings)
    mark_reviewed(loc, refs, session, findings)
    subject = {
        "log": str(loc.log_file),
        "session": session or "(all relayed)",
        "lock": str(path),
        "sessions": sessions,
        "policy": pol.source or "(defaults)",
        "sealed": sealed.line,
    }
    notes = [f"{len(done.problems)} damaged log record(s) skipped"] if done.problems else []
    report = Report("review", subject, findings, notes, done.verdicts, limit)
    click.echo(findings_renderer(fmt)(report), nl=False)
    return findings_exit(findings, fail_on)


@click.command("rules")
@format_option("text", "json", help="text for reading; json (mcpshim.rules/1) for tools.")
def rules_(fmt: str) -> None:
    """List every rule: stable id, default severity and confidence, summary and remediation
    (the severity rubric: docs/verdicts.md)."""
    from mcpshim.review.catalogue import rules
    from mcpshim.review.findings import rule_json

    doc = [rule_json(r) for k, r in rules().items() if not k.startswith("MCS9")]
    if fmt == "json":
        click.echo(json.dumps({"schema": "mcpshim.rules/1", "rules": doc}, indent=2))
        return
    for r in doc:
        cwe = f" ({', '.join(r['cwe'])})" if r["cwe"] else ""
        click.echo(f"{r['id']} {r['name']} [{r['severity']}, {r['confidence']}]{cwe}")
        click.echo(f"    {r['summary']}")
        click.echo(f"    fix: {r['remediation']}")


@click.group("policy")
def policy_group() -> None:
    """Review policies (TOML; `policy init` writes one with every key explained)."""


@policy_group.command("init")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write here instead of stdout.",
)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def policy_init(output: Path | None, force: bool) -> None:
    """Write a starter policy: today's defaults made explicit, with one example command."""
    from mcpshim.review import policy

    text = policy.dumps_starter()
    if output is None:
        click.echo(text, nl=False)
        return
    write_output(output, text, exclusive=not force)
    click.echo(f"wrote {escape(str(output))}")


@click.group("baseline")
def baseline_group() -> None:
    """Baselines of routine, approved sessions, for drift findings in review."""


@baseline_group.command("save")
@location_options
@session_option("Only records of this session (MCPSHIM_SESSION); an unknown one is an error.")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The baseline file to write (TOML).",
)
def baseline_save(
    shim_dir: Path | None, log_dir: Path | None, session: str | None, output: Path
) -> None:
    """Save the executables, subcommands/argument shapes and cwd roots a session used."""
    from mcpshim.family import tree
    from mcpshim.review import baseline as baseline_mod

    loc = locations(shim_dir, log_dir)
    session = resolve(loc, session)
    with _records(loc, session) as (records, _problems):
        base = baseline_mod.collect(tree.images(records, session), session or "")
    if base.records == 0:
        raise UsageError(
            "no records to make a baseline from" + (f" in session {session}" if session else "")
        )
    baseline_mod.save_baseline(base, output)
    click.echo(
        f"wrote {escape(str(output))}: {len(base.executables)} command(s), "
        f"{len(base.cwd_roots)} cwd root(s) from {base.records} record(s)"
    )


COMMANDS = [tree_, review, rules_, policy_group, baseline_group]
