"""`run --otlp`: stream a session while it runs, from a process of its own.

`run` starts this stream as one of mcpshim's own helpers (never a member of the family), so
nothing it does -- reading, mapping, waiting on an endpoint -- touches the relay's forwarding
path or the supervisor's loop. It reads the session's records back from the log as they are
appended (log.follow's follower, from where the log stood before the session began, through
any number of rotations) and sends each call's span as the call answers; when the session
ends (its session-end record, or `run` gone) it sends the rest: the session, its processes
and the findings on them, which are only final then. The mapping is the export's (model,
collect), so the ids agree with a later `mcpshim export otlp`. An endpoint that does not
answer is said once; then nothing more is tried, and the log keeps everything for `export`
to send later."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcpshim.family.attribution import Anchor, Collector
from mcpshim.log.execlog import EventRecord, Record, session_of
from mcpshim.log.follow import Follower, Mark
from mcpshim.otel.collect import collect_traces, trace_for
from mcpshim.otel.model import SessionTrace, SpanData, call_span_id
from mcpshim.otel.sdk import send
from mcpshim.paths import Locations
from mcpshim.review.policy import Policy
from mcpshim.shim.manifest import Manifest

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["LiveStream"]


class LiveStream:
    """Streams one session's spans to an exporter; `run()` returns when the session ends."""

    def __init__(
        self,
        loc: Locations,
        session: str,
        since: Mark,
        exporter: SpanExporter,
        *,
        policy: Policy,
        anchor: Anchor,
        host: str,
        warn: Callable[[str], None],
        manifest: Manifest | None = None,
        alive: Callable[[], bool] = lambda: True,
        poll: float = 0.2,
    ) -> None:
        self.loc, self.session, self.exporter = loc, session, exporter
        self.follow = Follower(loc, [], lag=None)
        self.since = since
        self.policy, self.anchor, self.host, self.warn = policy, anchor, host, warn
        self.manifest, self.alive, self.poll = manifest, alive, poll
        self.records: list[Record] = []
        self.collector = Collector(session)
        self.sent: set[int] = set()
        self.down = False
        logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)  # said once, by us

    def _send(self, trace: SessionTrace, spans: list[SpanData]) -> None:
        spans = [s for s in spans if s.span_id not in self.sent]
        if not spans or self.down:
            return
        if send(trace, self.exporter, spans)[1] == 0:
            self.sent.update(s.span_id for s in spans)
            return
        self.down = True
        self.warn(
            f"the OTLP endpoint did not take session {self.session}'s spans; it is all in the "
            f"log: `mcpshim export otlp --session {self.session} --endpoint URL` sends it later"
        )

    def _answered(self) -> None:
        """Send the spans of the calls answered so far (final once answered)."""
        atts = self.collector.results(self.anchor, final=False)
        if not atts:
            return
        att = atts[0]
        trace = trace_for(att, self.collector.sessions[self.session].events, self.host)
        done = {call_span_id(self.session, c) for c in att.calls if c.response is not None}
        self._send(trace, [s for s in trace.spans if s.span_id in done])

    def step(self, records: list[Record]) -> bool:
        """Take what was appended; True once the session has ended."""
        answered = ended = False
        for rec in records:
            if session_of(rec) != self.session:
                continue
            self.records.append(rec)
            self.collector.feed(rec)
            if isinstance(rec, EventRecord):
                answered |= rec.kind == "mcp-response"
                ended |= rec.kind == "session-end"
        if answered and not ended:
            self._answered()
        return ended

    def run(self) -> int:
        """Follow until the session ends (or `run` is gone), then send the rest; returns the
        number of spans sent."""
        try:
            first = self.follow.start(False, self.since) if self.loc.log_dir.is_dir() else []
            ended = self.step(first)
            while not ended and self.alive():
                time.sleep(self.poll)
                ended = self.step(self.follow.poll())
            self.step(self.follow.flush())
            traces = collect_traces(
                self.records,
                policy=self.policy,
                anchor=self.anchor,
                host=self.host,
                session=self.session,
                shim_dir=str(self.loc.shim_dir),
                manifest=self.manifest,
            )
            for trace in traces:
                self._send(trace, list(trace.spans))
        finally:
            self.follow.close()
            self.exporter.shutdown()
        return len(self.sent)
