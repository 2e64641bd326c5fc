"""One review pipeline: a log's (or one session's) findings, attributions, verdicts and
coverage, made once for every command that shows them.

Review, report, export and approve all need the same steps: the streaming review of the
process model (engine: one pass over the log, or over one session's part of it), the
attribution of each relayed session's processes to its tool calls, the findings filed under
the calls that started what they are about (plus the tool-call rules, MCS5xx), the policy,
and each call's verdict. `review_log` does it from the log's segments, `review_records` in
one pass over records already read (a live stream, a report's session); review.held gives
the departures from an approval instead. Renderers only render what these return.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

from mcpshim.family import attribution
from mcpshim.family.attribution import Anchor, Attribution, Collector
from mcpshim.log import execlog
from mcpshim.log.execlog import LogProblem, Record
from mcpshim.paths import Locations
from mcpshim.review.baseline import Baseline
from mcpshim.review.engine import Progress, ReviewResult, review
from mcpshim.review.engine import review_log as _review_log
from mcpshim.review.filing import regroup
from mcpshim.review.findings import Finding, Severity
from mcpshim.review.policy import Policy, apply_policy
from mcpshim.review.rules.file_rules import allowed_reads, name_writers, writers_of
from mcpshim.review.rules.mcp_rules import session_findings
from mcpshim.review.verdicts import CallVerdict, call_verdicts
from mcpshim.shim.manifest import Manifest, load_manifest

__all__ = [
    "Reviewed",
    "review_log",
    "review_records",
    "with_calls",
]


@dataclass(frozen=True)
class Reviewed:
    """What a review found, and of what: findings filed under the tool calls that started
    what they are about, each relayed session's attribution, each call's verdict, and the
    counts and coverage of what was read."""

    result: ReviewResult
    attributions: list[Attribution] = field(default_factory=list)
    verdicts: list[CallVerdict] = field(default_factory=list)
    problems: list[LogProblem] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return self.result.findings


def with_calls(
    result: ReviewResult, atts: list[Attribution], policy: Policy, verdicts: bool = True
) -> Reviewed:
    """Review's findings filed under each relayed session's tool calls, the MCS5xx findings
    added (the policy applied to them), and (`verdicts`) each call's verdict."""
    if not atts:
        return Reviewed(result)
    extra = [f for att in atts for f in session_findings(att, policy)]
    filed = regroup(result.findings, atts)
    filed = allowed_reads(name_writers(filed, writers_of(filed, atts)), policy.files)
    findings = _hints(filed, atts) + apply_policy(extra, policy)
    done = dataclasses.replace(result, findings=findings)
    return Reviewed(done, atts, call_verdicts(atts, findings) if verdicts else [])


#: findings from a helper's arguments: where it may connect, a guess
_ARGUMENT_RULES = frozenset({"MCS108", "MCS109"})


def _hints(findings: list[Finding], atts: list[Attribution]) -> list[Finding]:
    """In a session whose socket calls were traced, what a helper's arguments name is a hint
    beside the kernel's facts (MCS306/307 say the contact or the attempt): info."""
    traced = {att.session for att in atts if att.net.is_traced(att.session)}
    return [
        f.with_severity(Severity.INFO)
        if f.rule.id in _ARGUMENT_RULES and f.call is not None and f.call.session in traced
        else f
        for f in findings
    ]


def review_log(
    loc: Locations,
    *,
    policy: Policy,
    session: str | None = None,
    baseline: Baseline | None = None,
    progress: Progress | None = None,
) -> Reviewed:
    """The log's review (or one session's), its tool calls attributed; an unknown session
    is an input error."""
    problems: list[LogProblem] = []
    collector = attribution.scoped_collector(loc, session)
    if (
        collector is None
        and session is None
        and loc.log_dir.is_dir()
        and (attribution.log_has_relayed_sessions(loc))
    ):
        # the whole log: attribution takes its records from review's own pass (through
        # engine's lean listings) instead of a second read that kept every listing whole
        collector = Collector(None)
    result = _review_log(loc, problems, policy=policy, session=session,
                         shim_dir=str(loc.shim_dir), manifest=load_manifest(loc.shim_dir),
                         baseline=baseline, progress=progress, collector=collector)  # fmt: skip
    if session is not None and not result.in_session:
        raise execlog.missing_session(loc, session)
    atts = (attribution.attribute_log(loc, session) if collector is None
            else collector.results(attribution.anchors_for(loc)))  # fmt: skip
    out = with_calls(result, atts, policy)
    return dataclasses.replace(out, problems=problems)


def review_records(
    records: Iterable[Record],
    *,
    policy: Policy,
    anchor: Anchor,
    session: str | None = None,
    shim_dir: str | None = None,
    manifest: Manifest | None = None,
) -> tuple[Reviewed, Collector]:
    """`review_log` in one pass over records already read (no verdicts: a report and a
    trace show calls their own way); the collector keeps each relayed session's events."""
    collector = Collector(session)
    result = review(collector.tee(records), policy=policy, session=session, shim_dir=shim_dir,
                    manifest=manifest)  # fmt: skip
    return with_calls(result, collector.results(anchor), policy, verdicts=False), collector
