"""Coverage of a session: every exec any source saw, and for each shimmed command how many
ran through its shim and how many bypassed it (and why: family.bypass).

Sources: shim records (one per exec through a shim), the trace (every exec; a shim's exec is
two traced execs, its script then its target, counted once), the sampler (`observed`:
processes no shim recorded, each counted once, when the trace does not have them) and a
shim's parent evidence (the command line of a shell parent, when nothing else has it). The
trace's state says how complete that is: complete, with gaps, incomplete (survivors still
traced at the end), lost (its output could not be stored), off, or unavailable (and why).
`CoverageCollector` is fed the records of a review or tree pass; a shim record costs it a
counter, so large logs stay cheap.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcpshim.family.bypass import (
    CAUSES,
    SHELLS,
    Cause,
    Exec,
    Lineage,
    explain,
    session_shim_dir,
    shim_dirs_of,
)
from mcpshim.family.images import Image, bytes_field, image_of, parse_time
from mcpshim.family.shellset import ShellSet
from mcpshim.family.trace_merge import argv_field, trace_image
from mcpshim.log.execlog import EventRecord, ExecRecord, Record

__all__ = ["SHELLS_KEPT", "Bypassed", "CoverageCollector", "SessionCoverage"]

SHELLS_KEPT = 4096
_KINDS = frozenset(
    {"session-start", "trace-exec", "trace-fork", "trace-summary", "trace-fallback", "observed"}
)


@dataclass(frozen=True)
class Bypassed:
    """One exec of a shimmed command that did not go through its shim."""

    exec: Exec
    source: str  # trace | sampler | parent
    image: Image
    cause: Cause
    root: bool = False  # the session's command itself, as `mcpshim run` started it


@dataclass(frozen=True)
class SessionCoverage:
    session: str
    execs: int
    through: int
    bypassed: tuple[Bypassed, ...]
    no_shim: int
    commands: Mapping[str, tuple[int, int]]  # shimmed command -> (through, bypassed)
    sources: Mapping[str, int]
    trace: str  # complete | gaps | incomplete | lost | missing | off | unavailable
    trace_note: str = ""
    zdotdir: bool = False
    #: run --contain: the session-start record's `contain` object (None: not asked for)
    contain: Mapping[str, Any] | None = None

    def causes(self) -> dict[str, int]:
        return dict(Counter(b.cause.kind for b in self.bypassed).most_common())

    def trace_text(self) -> str:
        return {
            "complete": "complete",
            "gaps": f"complete, but {self.trace_note}",
            "incomplete": "incomplete (survivors were still traced at the end; their later "
            "execs are not in the log)",
            "missing": "missing (no trace summary: the session did not end, or the tracer failed)",
            "lost": f"incomplete (its output could not be stored: {self.trace_note}; the execs "
            "after that are not in the log)",
            "off": "off (--no-trace): shims and sampling only",
            "unavailable": f"unavailable ({self.trace_note}): shims and sampling only",
        }.get(self.trace, self.trace)

    def contain_text(self) -> str:
        c = self.contain
        if c is None:
            return "not contained"
        if c.get("state") == "landlock":
            rules = ", ".join(str(r) for r in c.get("restricts") or ["execute"])
            return f"contained (Landlock ABI {c.get('abi')}: {rules})"
        return f"not contained ({str(c.get('reason') or 'no reason recorded')[:160]})"

    def line(self) -> str:
        """e.g. '42 execs: 30 through shims, 12 bypassed (9 by absolute path, 3 with the shim
        dir missing from PATH), 5 with no shim; trace: complete'."""
        why = ", ".join(f"{n} {CAUSES.get(k, k)}" for k, n in self.causes().items())
        bypassed = f"{len(self.bypassed)} bypassed" + (f" ({why})" if why else "")
        return (
            f"{self.execs} execs: {self.through} through shims, {bypassed}, {self.no_shim} "
            f"with no shim; trace: {self.trace_text()}; {self.contain_text()}"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "execs": self.execs,
            "through_shims": self.through,
            "bypassed": len(self.bypassed),
            "bypass_causes": self.causes(),
            "no_shim": self.no_shim,
            "commands": {
                k: {"through_shim": t, "bypassed": b} for k, (t, b) in sorted(self.commands.items())
            },
            "sources": dict(self.sources),
            "trace": {"status": self.trace, "text": self.trace_text()},
            "zdotdir": self.zdotdir,
            "contain": {
                "status": (self.contain or {}).get("state", "off"),
                "abi": (self.contain or {}).get("abi"),
                "text": self.contain_text(),
            },
            "line": self.line(),
        }


@dataclass
class _Session:
    start: Mapping[str, Any] | None = None
    shim: Counter[str] = field(default_factory=Counter)
    # Shells that went through a shim, the latest SHELLS_KEPT (a shell's first shimmed child,
    # whose record keeps the shell's command line, comes soon after the shell's own record)
    shells: ShellSet = field(default_factory=ShellSet)
    parent_seen: int = 0  # parent evidence records
    parents: list[tuple[ExecRecord, int | None]] = field(default_factory=list)  # no shim's
    traced: list[EventRecord] = field(default_factory=list)
    forks: list[EventRecord] = field(default_factory=list)
    observed: list[EventRecord] = field(default_factory=list)
    summary: Mapping[str, Any] | None = None
    fallback: Mapping[str, Any] | None = None


class CoverageCollector:
    """Fed a pass's records (any order of sessions); `results` gives each run session's
    coverage. Only sessions started by `mcpshim run` (a session-start record) count."""

    def __init__(self, session: str | None = None) -> None:
        self.only = session
        self.sessions: dict[str, _Session] = {}

    def _get(self, sid: Any) -> _Session | None:
        if not isinstance(sid, str) or not sid or (self.only is not None and sid != self.only):
            return None
        s = self.sessions.get(sid)
        if s is None:
            s = self.sessions[sid] = _Session()
        return s

    def feed_exec(
        self, session: str, shim: str, boot: str, pid: int, start: int | None, parent: bool
    ) -> bool:
        """An exec record by its fields (`feed` for an `ExecRecord`): its session, shim,
        boot id, pid, start, and whether it holds its parent's command line and ppid.
        True when the record itself must follow (`parent_record`): it is kept."""
        s = self._get(session)
        if s is None:
            return False
        s.shim[shim] += 1
        if shim in SHELLS:
            s.shells.add(boot, pid, start, SHELLS_KEPT)
        return parent

    def parent_record(self, rec: ExecRecord) -> None:
        """The record `feed_exec` asked for: parent evidence, kept unless its shell is."""
        s = self._get(rec.session)
        assert s is not None and rec.ppid is not None
        s.parent_seen += 1
        if (rec.boot_id, rec.ppid, rec.parent_start) not in s.shells:
            s.parents.append((rec, rec.parent_start))

    def feed(self, rec: Record) -> None:
        if isinstance(rec, ExecRecord):
            parent = bool(rec.parent_cmdline) and rec.ppid is not None
            if self.feed_exec(rec.session, rec.shim, rec.boot_id, rec.pid, rec.start, parent):
                self.parent_record(rec)
            return
        if rec.kind not in _KINDS:
            return
        s = self._get(rec.data.get("session"))
        if s is None:
            return
        d = rec.data
        if rec.kind == "session-start":
            s.start = d
        elif rec.kind == "trace-exec":
            if d.get("result") == "ok":
                s.traced.append(rec)
        elif rec.kind == "trace-fork":
            s.forks.append(rec)
        elif rec.kind == "observed":
            s.observed.append(rec)
        elif rec.kind == "trace-summary":
            s.summary = d
        else:
            s.fallback = d

    def tee(self, records: Iterable[Record]) -> Iterable[Record]:
        for rec in records:
            self.feed(rec)
            yield rec

    def map_where(self, fn: Callable[[str], str]) -> None:
        """Rewrite every kept record's position (a split review's offsets)."""
        for s in self.sessions.values():
            s.parents = [(dataclasses.replace(r, where=fn(r.where)), p) for r, p in s.parents]
            for name in ("traced", "forks", "observed"):
                recs: list[EventRecord] = getattr(s, name)
                setattr(s, name, [dataclasses.replace(r, where=fn(r.where)) for r in recs])

    def absorb(self, later: CoverageCollector) -> None:
        """Add what a collector fed the records right after ours gathered (split review)."""
        for sid, o in later.sessions.items():
            s = self.sessions.setdefault(sid, _Session())
            s.start = s.start or o.start
            s.shim.update(o.shim)
            s.parent_seen += o.parent_seen
            s.parents += [p for p in o.parents if (p[0].boot_id, p[0].ppid, p[1]) not in s.shells]
            s.shells.update(o.shells)
            s.traced += o.traced
            s.forks += o.forks
            s.observed += o.observed
            s.summary = o.summary or s.summary
            s.fallback = o.fallback or s.fallback

    def results(
        self, shim_names: Iterable[str] = (), shim_dirs: Iterable[str] = ()
    ) -> list[SessionCoverage]:
        """Each session run by `mcpshim run`, in the order their records came."""
        names = frozenset(shim_names)
        extra = tuple(shim_dirs)
        return [
            _account(sid, s, names, extra)
            for sid, s in self.sessions.items()
            if s.start is not None
        ]


# ---- accounting ----------------------------------------------------------------------------


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _when(d: Mapping[str, Any]) -> float:
    t = parse_time(d.get("time"))
    return t.timestamp() if t else 0.0


def _exec(d: Mapping[str, Any], exe: str, argv: str) -> Exec | None:
    pid = _int(d.get("pid"))
    if pid is None:
        return None
    path = d.get("path")
    return Exec(
        str(d.get("boot_id") or ""),
        pid,
        _int(d.get("start")),
        _int(d.get("ppid")),
        _int(d.get("parent_start")),
        _when(d),
        bytes_field(d, exe),
        tuple(argv_field(d, argv)),
        bytes_field(d, "path") if isinstance(path, str) else None,
        "path" in d,
    )


def _is(e: Exec, ident: tuple[int | None, int | None]) -> bool:
    return e.pid == ident[0] and (
        ident[1] is None or e.start is None or abs(e.start - ident[1]) <= 1
    )


def _trace_state(s: _Session) -> tuple[str, str]:
    mode = s.start.get("trace") if s.start else None
    if mode is None:  # a log from before the state was recorded
        mode = "strace" if s.summary else "unavailable" if s.fallback else "off"
    if mode == "unavailable":
        why = str((s.fallback or {}).get("reason") or "no reason recorded")
        return "unavailable", why.split(". ", maxsplit=1)[0].split("; ", maxsplit=1)[0][:160]
    if mode != "strace":
        return "off", ""
    if s.summary is None:
        return "missing", ""
    if s.summary.get("lost"):
        return "lost", str(s.summary["lost"])[:160]
    if not s.summary.get("complete"):
        return "incomplete", ""
    gaps = _int(s.summary.get("gaps")) or 0
    if gaps:
        return "gaps", f"{gaps} family member(s) no exec or fork record explains"
    return "complete", ""


def _as_invoked(e: Exec, shimmed: set[str]) -> Exec:
    """A sampled process's exe is resolved (/bin/sh is /usr/bin/dash on Debian): when its
    argv[0] names a shimmed command the exe's name does not, it ran as that command (the
    trace names the path exec was given, the same way)."""
    if e.command in shimmed or not e.argv:
        return e
    name = os.path.basename(e.argv[0]).decode("utf-8", "replace")
    return dataclasses.replace(e, name=name) if name in shimmed else e


def _parent_exec(rec: ExecRecord, pstart: int | None) -> Exec | None:
    """The shell parent a shim record kept (its NUL separators lost: argv[0] is found by
    the shell's name)."""
    if rec.ppid is None:
        return None
    text = rec.parent_cmdline
    word = text.split(b" ", 1)[0]
    base = os.path.basename(word)
    name = max((n for n in SHELLS if base.startswith(n.encode())), key=len, default="")
    argv0 = word[: len(word) - len(base) + len(name)] if name else word
    t = rec.time
    return Exec(rec.boot_id, rec.ppid, pstart, None, None, t.timestamp() if t else 0.0,
                b"", (argv0, text[len(argv0) :]), None, False)  # fmt: skip


def _parent_image(rec: ExecRecord, e: Exec) -> Image:
    return Image("parent", rec.where, rec.time, e.boot, e.pid, None, e.start, None, b"",
                 e.command, b"", e.argv[0], e.argv[1:], rec.session)  # fmt: skip


def _account(
    sid: str, s: _Session, names: frozenset[str], extra_dirs: tuple[str, ...]
) -> SessionCoverage:
    start = s.start or {}
    dirs = shim_dirs_of([session_shim_dir(start), *extra_dirs])
    via: Counter[str] = Counter()
    shimmed = set(names) | set(s.shim)
    execs: list[tuple[Exec, str, Image]] = []
    ancestry: list[Exec] = []  # every image a cause may name, shimmed ones too
    traced_ids: dict[tuple[str, int], list[int | None]] = {}
    for rec in s.traced:
        d = rec.data
        e = _exec(d, "filename", "argv")
        if e is None:
            continue
        traced_ids.setdefault((e.boot, e.pid), []).append(e.start)
        if d.get("shim_script"):
            shimmed.add(os.path.basename(e.filename).decode("utf-8", "replace"))
            continue
        ancestry.append(e)
        if isinstance(d.get("via_shim"), str):
            via[d["via_shim"]] += 1
            shimmed.add(d["via_shim"])
            continue
        img = trace_image(rec)
        if img is not None:
            execs.append((e, "trace", img))
    for rec in s.forks:
        pid = _int(rec.data.get("pid"))
        if pid is not None:
            key = (str(rec.data.get("boot_id") or ""), pid)
            traced_ids.setdefault(key, []).append(_int(rec.data.get("start")))

    def traced(boot: str, pid: int, start: int | None) -> bool:
        return any(
            a is None or start is None or abs(a - start) <= 1
            for a in traced_ids.get((boot, pid), ())
        )

    latest: dict[tuple[str, int, int | None], EventRecord] = {}
    sampled: set[tuple[str, int, int | None]] = set()
    for rec in s.observed:  # one per process: the image it was last seen with
        e = _exec(rec.data, "exe", "cmdline")
        if e is not None:
            sampled.add((e.boot, e.pid, e.start))
            if not traced(e.boot, e.pid, e.start):
                latest[(e.boot, e.pid, e.start)] = rec
    seen = set(latest)
    for rec in latest.values():
        e = _exec(rec.data, "exe", "cmdline")
        img = image_of(rec)
        if e is not None and img is not None:
            execs.append((_as_invoked(e, shimmed), "sampler", img))
    for prec, pstart in s.parents:
        e = _parent_exec(prec, pstart)
        if e is None:
            continue
        ident = (e.boot, e.pid, e.start)
        if traced(*ident) or ident in seen:
            continue
        seen.add(ident)
        execs.append((e, "parent", _parent_image(prec, e)))
    root = (_int(start.get("child_pid")), _int(start.get("child_start")))
    root_first = min(
        (
            e.time
            for e in (_exec(r.data, "filename", "argv") for r in s.traced)
            if e and _is(e, root)
        ),
        default=min((e.time for e, _s, _i in execs if _is(e, root)), default=None),
    )
    lineage = Lineage([*ancestry, *(e for e, src, _img in execs if src != "trace")])
    zdotdir = bool(start.get("zdotdir"))
    bypassed: list[Bypassed] = []
    no_shim = 0
    by_cmd: Counter[str] = Counter()
    for e, src, img in execs:
        name = e.command
        if name not in shimmed:
            no_shim += 1
            continue
        by_cmd[name] += 1
        first = _is(e, root) and e.time == root_first
        bypassed.append(Bypassed(e, src, img, explain(e, lineage, dirs, zdotdir), first))
    through = {n: max(s.shim[n], via[n]) for n in shimmed}
    commands = {n: (through[n], by_cmd[n]) for n in shimmed if through[n] or by_cmd[n]}
    state, note = _trace_state(s)
    sources = {  # what each source saw, before they are joined
        "shim": sum(s.shim.values()),
        "trace": len(s.traced),
        "sampler": len(sampled),
        "parent": s.parent_seen,
    }
    return SessionCoverage(
        sid,
        sum(through.values()) + len(bypassed) + no_shim,
        sum(through.values()),
        tuple(bypassed),
        no_shim,
        commands,
        sources,
        state,
        note,
        zdotdir,
        contain if isinstance(contain := start.get("contain"), dict) else None,
    )
