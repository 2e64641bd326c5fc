"""The one process model: every source's records merged into execs, once, for every reader.

A process is seen by up to four sources: its shim (the PATH lookup, the redacted argv), the
tracer (every exec, exactly, and the failed attempts before one), the sampler (what lived
at a sample: sockets, survival) and a shim's parent evidence (a shell's command line).
`Assembler` is fed a pass's records in log order and hands out each exec once, as an
`Image` entry, whichever sources saw it (which record is an exec is `log.ledger`'s rule,
so the session index counts the same); the shim hop is part of its exec, a sample of a
traced process adds no exec, a title the process gave itself is no exec (the sampler
records an image only when exec replaced it), and the failed steps of a PATH search are
folded into the exec they led to (`Image.attempts`). What is not an exec but a rule may
speak of (an exec that failed for good, a search step of an exec another record shows, a
tracer's gap with execs of its own) comes out too, as an image whose `entry` is false.

Tree, review, attribution (report, approve, export) and the coverage line all take their
images from here, so a process is one node, each exec one entry, and every count agrees.
A future source (evidence that places a process under a call) adds a conversion here, not
a reader-specific assembly. The tracer's socket calls (`trace-net`) are such a source: they
come after the execs they belong to, so they are kept by process identity (`net`, a
family.netfacts.NetFacts) for readers to place on each node's execs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import datetime
from typing import Any

from mcpshim.family.coverage import CoverageCollector
from mcpshim.family.images import Image, image_of, invoked_name, parent_image, parse_time
from mcpshim.family.netfacts import NetFacts
from mcpshim.family.trace_merge import fork_image, gap_image, trace_image
from mcpshim.log.execlog import EventRecord, ExecRecord, Record, session_of
from mcpshim.log.ledger import (
    ENTRY,
    HOLD,
    SHELLS,
    Ledger,
    Recall,
    ident_key,
    sample_is_helper,
    trace_is_exec,
)
from mcpshim.log.netrecords import net_record

__all__ = ["Assembler", "entries", "every_session"]

_EVENTS = frozenset({"session-start", "session-end", "trace-summary", "trace-exec", "trace-gap",
                     "observed", "trace-fallback", "trace-fork", "trace-net"})  # fmt: skip


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _observed_name(img: Image) -> Image:
    name = invoked_name(img.argv0, img.command)
    return img if name == img.command else replace(img, command=name)


def every_session(_session: str) -> bool:
    """`keep_net` for a reader that shows every session's socket calls (tree)."""
    return True


class Assembler:
    """Records in, images out (see the module docstring). `only`: images of one session
    (the ledger still sees every record, so the model of a session never depends on what
    else was read). `keep_net`: the sessions whose socket calls `net` keeps (none by
    default: a whole-log review holds no record per connection)."""

    def __init__(
        self,
        only: str | None = None,
        coverage: CoverageCollector | None = None,
        ledger: Ledger | None = None,
        keep_net: Callable[[str], bool] | None = None,
    ) -> None:
        self.only = only
        self.keep_net = keep_net
        self.ledger = ledger if ledger is not None else Ledger()
        self.coverage = coverage if coverage is not None else CoverageCollector(only)
        self._held: dict[int, tuple[str, Record]] = {}  # token -> (what, record)
        #: a PATH search's failed steps by (session, boot, pid), until what they led to
        self._attempts: dict[tuple[str, str, int], list[tuple[EventRecord, Image]]] = {}
        self.net = NetFacts()  # the sessions' socket calls, by process (trace-net)
        #: when each traced process of those sessions exited (trace-exec, trace-fork)
        self.exits: dict[tuple[str, int, int | None], datetime] = {}
        #: each traced process's fork parent (ppid, its start), which a shim record made
        #: after the parent had exited does not hold (family.tree.relink_traced)
        self.forked_by: dict[tuple[str, int, int | None], tuple[int, int | None]] = {}
        #: a traced session's samples held until the trace decides, by identity: what a
        #: process that never exec'd (trace-fork) is known to run
        self._sampled: dict[str, EventRecord] = {}

    # ---- shim records ------------------------------------------------------------------

    def shim_exec(
        self, session: str, shim: str, boot: str, pid: int, start: int | None, parent: bool
    ) -> bool:
        """A shim record by its fields (a row's): counted; True when it holds parent
        evidence, which `parent_record` must then be given."""
        self.coverage.shim(session, shim)
        if parent:
            return True
        if shim in SHELLS:  # a shell a later record may name as its parent
            self.ledger.prime(ident_key(boot, pid, start))
        return False

    def parent_record(self, rec: ExecRecord) -> list[Image]:
        """A shim record with its shell's command line: the shell's exec when nothing else
        saw it (now, or once the session's samples or trace are in)."""
        key = ident_key(rec.boot_id, rec.ppid, rec.parent_start)
        ident = ident_key(rec.boot_id, rec.pid, rec.start)
        what, token = self.ledger.shim(rec.session, rec.shim, ident, key)
        out = self._released()
        if what == ENTRY:
            out.append(self._parent(rec))
        elif what == HOLD:
            self._held[token] = ("parent", rec)
        return [i for i in out if self._mine(i)]

    def _parent(self, rec: ExecRecord) -> Image:
        img = parent_image(rec)
        self.coverage.entry(img, rec)
        return img

    # ---- any record ----------------------------------------------------------------------

    def feed(self, rec: Record) -> list[Image]:
        """The images this record makes ready (its own, and held ones it decides)."""
        if isinstance(rec, ExecRecord):
            parent = bool(rec.parent_cmdline) and rec.ppid is not None
            mine = self.shim_exec(rec.session, rec.shim, rec.boot_id, rec.pid, rec.start, parent)
            img = image_of(rec)
            own = [img] if img is not None and self._mine(img) else []
            return own + (self.parent_record(rec) if mine else [])
        if rec.kind not in _EVENTS:
            if isinstance(rec, Recall):
                self.ledger.recall(rec)
            return []
        d = rec.data
        sid = session_of(rec) or ""
        self.coverage.event(rec)
        out: list[Image] = []
        kind = rec.kind
        if kind == "session-start":
            self.ledger.start(sid, d.get("trace"))
        elif kind == "trace-summary":
            self.ledger.summary(sid)
            if "net" in d and self._keeps_net(sid):  # the socket calls were traced
                self.net.traced.add(sid)
            out = self._released()
        elif kind == "trace-net":
            n = net_record(rec)
            if n is not None and self._keeps_net(sid):
                self.net.add(n)
        elif kind == "session-end":
            self.ledger.end(sid)
            out = self._released()
            self._sampled = {k: r for k, r in self._sampled.items() if session_of(r) != sid}
        elif kind == "observed" and not sample_is_helper(d):
            key = ident_key(d.get("boot_id") or "", d.get("pid"), d.get("start"))
            what, token = self.ledger.sample(sid, key)
            out = self._released()
            if what == ENTRY:
                out += self._sample(rec)
            elif what == HOLD:
                self._held[token] = ("sample", rec)
                self._sampled[key] = rec
        elif kind == "trace-exec":
            self._exit(sid, d)
            out = self._trace(sid, rec)
        elif kind == "trace-fork":
            self._exit(sid, d)
            key = ident_key(d.get("boot_id") or "", d.get("pid"), d.get("start"))
            sampled = self._sampled.pop(key, None)
            seen = image_of(sampled) if sampled is not None else None
            img = fork_image(rec, _observed_name(seen) if seen is not None else None)
            out = [img] if img is not None else []
        elif kind == "trace-gap":
            entry = d.get("seen_as") != "trace"
            self.ledger.counted(sid, entry)
            img = gap_image(rec)
            if img is not None:
                img = replace(img, entry=entry)
                if entry:
                    self.coverage.entry(img, rec)
                out = [img]
        return [i for i in out if self._mine(i)]

    def finish(self) -> list[Image]:
        """The end of what was read: what still waited, and attempts that led nowhere."""
        self.ledger.finish()
        out = self._released()
        for pending in self._attempts.values():
            out += [replace(img, entry=False) for _rec, img in pending]
        self._attempts.clear()
        return [i for i in out if self._mine(i)]

    def tee(self, records: Iterable[Record], sink: Callable[[Image], None]) -> Iterator[Record]:
        """Pass records through, handing each image made ready to `sink`."""
        for rec in records:
            for img in self.feed(rec):
                sink(img)
            yield rec
        for img in self.finish():
            sink(img)

    # ---- helpers -------------------------------------------------------------------------

    def _mine(self, img: Image) -> bool:
        return self.only is None or img.session == self.only

    def _exit(self, sid: str, d: Any) -> None:
        pid = _int(d.get("pid"))
        if pid is None or not self._keeps_net(sid):
            return
        ident = (str(d.get("boot_id") or ""), pid, _int(d.get("start")))
        t = parse_time(d.get("exit_time"))
        if t is not None:
            self.exits[ident] = t
        ppid = _int(d.get("ppid"))
        if ppid is not None:
            self.forked_by.setdefault(ident, (ppid, _int(d.get("parent_start"))))

    def _keeps_net(self, sid: str) -> bool:
        keep = self.keep_net is not None and self.keep_net(sid)
        return keep and (self.only is None or sid == self.only)

    def _released(self) -> list[Image]:
        out: list[Image] = []
        for token, entry in self.ledger.released:
            what, rec = self._held.pop(token)
            if not entry:
                continue
            if what == "parent":
                assert isinstance(rec, ExecRecord)
                out.append(self._parent(rec))
            else:
                assert isinstance(rec, EventRecord)
                out += self._sample(rec)
        return out

    def _sample(self, rec: EventRecord) -> list[Image]:
        img = image_of(rec)
        if img is None:
            return []
        img = _observed_name(img)
        self.coverage.entry(img, rec)
        return [img]

    def _trace(self, sid: str, rec: EventRecord) -> list[Image]:
        d = rec.data
        entry = trace_is_exec(d)
        self.ledger.counted(sid, entry)
        pid = _int(d.get("pid"))
        key = (sid, str(d.get("boot_id") or ""), pid if pid is not None else -1)
        if d.get("result") != "ok":
            img = trace_image(rec)
            if img is None:
                return []
            if d.get("search"):  # a step of a PATH search: it belongs to what it led to
                self._attempts.setdefault(key, []).append((rec, img))
                return []
            return [*self._flush_attempts(key), replace(img, entry=False)]
        self.coverage.traced(rec)
        if not entry:
            # a half of a shim's exec: the shim's record is that exec; what the search
            # tried first is said on its own (the shim's image came long before), as part
            # of the shim's exec (shim_hop: no rule reads it as a program of its own)
            return [replace(i, shim_hop=True) for i in self._flush_attempts(key)]
        img = trace_image(rec)
        if img is None:
            return []
        tried = self._attempts.pop(key, [])
        if tried:
            img = replace(img, attempts=tuple((i.argv0, i.source.partition("/")[2])
                                              for _r, i in tried))  # fmt: skip
        self.coverage.entry(img, rec)
        return [img]

    def _flush_attempts(self, key: tuple[str, str, int]) -> list[Image]:
        return [replace(img, entry=False) for _rec, img in self._attempts.pop(key, [])]


def entries(records: Iterable[Record], session: str | None = None) -> Iterator[Image]:
    """Every image of the model (entries and the facts rules read), in the order made."""
    asm = Assembler(session)
    for rec in records:
        yield from asm.feed(rec)
    yield from asm.finish()
