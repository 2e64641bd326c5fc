"""Coverage of a session: every exec any source saw, and for each shimmed command how many
ran through its shim and how many bypassed it (and why: family.bypass).

The execs are the process model's (family.model: each exec once, whichever sources saw
it), so this line, tree, `log --format ecs`, `export otlp` and `sessions` count the same.
The trace's state says how complete that is: complete, with gaps, incomplete (survivors
still traced at the end), lost (its output could not be stored), off, or unavailable (and
why). `CoverageCollector` is fed by the model as it makes execs; a shim's exec costs it a
counter, so large logs stay cheap.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcpshim.family.bypass import (
    CAUSES,
    Cause,
    Exec,
    Lineage,
    explain,
    session_shim_dir,
    shim_dirs_of,
)
from mcpshim.family.images import Image, bytes_field, parent_image, parse_time
from mcpshim.family.trace_merge import argv_field
from mcpshim.log.execlog import EventRecord, ExecRecord, Record

__all__ = ["Bypassed", "CoverageCollector", "SessionCoverage"]


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
    #: traced: the tracer recorded the family's socket calls (`net` of them); sampled: only
    #: the sockets open at a sample are evidence (untraced, or a trace before issue 29)
    network: str = "sampled"
    net: int = 0
    #: traced: the tracer recorded the file facts (`file_records` of them); off: traced
    #: without them (run --trace-files is off by default); sampled: untraced, only open
    #: files a snapshot saw
    files: str = "sampled"
    file_records: int = 0

    def files_text(self) -> str:
        if self.files == "traced" and self.file_records:
            return f"traced ({self.file_records} file record(s))"
        if self.files == "traced":
            return (
                "traced (no credential file opened, place that runs later written, or "
                "written file run)"
            )
        if self.files == "off":
            return "not traced (run --trace-files records them)"
        return "sampled (not traced: only the open files a snapshot saw)"

    def network_text(self) -> str:
        if self.network == "traced":
            return f"traced ({self.net} socket call record(s))"
        return "sampled (only sockets open when the sampler looked; short connections unseen)"

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
            f"with no shim; trace: {self.trace_text()}; network: {self.network_text()}; "
            f"files: {self.files_text()}; {self.contain_text()}"
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
            "network": {"status": self.network, "records": self.net, "text": self.network_text()},
            "files": {
                "status": self.files,
                "records": self.file_records,
                "text": self.files_text(),
            },
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
    hops: set[str] = field(default_factory=set)  # commands the trace saw go through a shim
    parent_seen: int = 0  # parent evidence records
    traced: int = 0  # trace-exec records that succeeded
    sampled: set[tuple[str, int, int | None]] = field(default_factory=set)
    ancestry: list[Exec] = field(default_factory=list)  # traced execs (shim halves too)
    #: what a sampled process's parent ran, as the sampler saw it (`parent_exe`)
    parents: list[Exec] = field(default_factory=list)
    execs: list[tuple[Exec, str, Image]] = field(default_factory=list)  # entries, not shims'
    summary: Mapping[str, Any] | None = None
    fallback: Mapping[str, Any] | None = None


class CoverageCollector:
    """Fed by the process model (family.model) as it makes each exec; `results` gives each
    run session's coverage. Only sessions started by `mcpshim run` (a session-start
    record) count. A shim's exec costs a counter, so large logs stay cheap."""

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

    def shim(self, session: str, shim: str) -> None:
        """An exec through a shim."""
        s = self._get(session)
        if s is not None:
            s.shim[shim] += 1

    def event(self, rec: EventRecord) -> None:
        s = self._get(rec.data.get("session"))
        if s is None:
            return
        if rec.kind == "session-start":
            s.start = rec.data
        elif rec.kind == "trace-summary":
            s.summary = rec.data
        elif rec.kind == "trace-fallback":
            s.fallback = rec.data
        elif rec.kind == "observed":
            e = _exec(rec.data, "exe", "cmdline")
            if e is not None:
                s.sampled.add((e.boot, e.pid, e.start))

    def traced(self, rec: EventRecord) -> None:
        """A trace-exec that succeeded: an exec of its own or a half of a shim's; either
        way an ancestor a bypass's cause may name (its PATH is on record)."""
        s = self._get(rec.data.get("session"))
        e = _exec(rec.data, "filename", "argv") if s is not None else None
        if s is None or e is None or rec.data.get("shim_helper") is True:
            return  # (the shim library's own helper: no exec of the family)
        s.traced += 1
        d = rec.data
        if d.get("shim_script"):
            s.hops.add(os.path.basename(e.filename).decode("utf-8", "replace"))
            return
        if isinstance(d.get("via_shim"), str):
            s.hops.add(d["via_shim"])
        s.ancestry.append(e)

    def entry(self, img: Image, rec: Record) -> None:
        """An exec of the model that no shim made (traced, sampled, a gap, a parent)."""
        s = self._get(img.session)
        if s is None:
            return
        if isinstance(rec, ExecRecord):  # parent evidence
            s.parent_seen += 1
            e = _parent_exec(rec)
            src = "parent"
        elif rec.kind == "trace-exec":
            e, src = _exec(rec.data, "filename", "argv"), "trace"
        else:
            e, src = _exec(rec.data, "exe", "cmdline"), "sampler"
            if e is not None:
                e = dataclasses.replace(e, name=img.command)
                if e.ppid is not None and (parent := bytes_field(rec.data, "parent_exe")):
                    s.parents.append(Exec(e.boot, e.ppid, e.parent_start, None, None, 0.0,
                                          parent, (), None, False))  # fmt: skip
        if e is not None:
            s.execs.append((e, src, img))

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


def _parents(s: _Session, known: list[Exec]) -> list[Exec]:
    """The programs sampled processes' parents ran, for the parents no exec on record
    shows (a shimmed parent: its shim record is not in the lineage; traced, its halves are)."""
    have = {(e.boot, e.pid) for e in known}
    return [p for p in s.parents if (p.boot, p.pid) not in have]


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


def _parent_exec(rec: ExecRecord) -> Exec | None:
    """The shell parent a shim record kept (family.model.parent_image names it)."""
    if rec.ppid is None:
        return None
    img = parent_image(rec)
    t = rec.time
    return Exec(rec.boot_id, rec.ppid, rec.parent_start, None, None,
                t.timestamp() if t else 0.0, b"", (img.argv0, *img.args), None, False,
                img.command)  # fmt: skip


def _account(
    sid: str, s: _Session, names: frozenset[str], extra_dirs: tuple[str, ...]
) -> SessionCoverage:
    start = s.start or {}
    dirs = shim_dirs_of([session_shim_dir(start), *extra_dirs])
    shimmed = set(names) | set(s.shim) | s.hops
    root = (_int(start.get("child_pid")), _int(start.get("child_start")))
    root_first = min((e.time for e, _s, _i in s.execs if _is(e, root)), default=None)
    known = [*s.ancestry, *(e for e, src, _img in s.execs if src != "trace")]
    lineage = Lineage([*known, *_parents(s, known)])
    zdotdir = bool(start.get("zdotdir"))
    bypassed: list[Bypassed] = []
    no_shim = 0
    by_cmd: Counter[str] = Counter()
    for e, src, img in s.execs:
        name = e.command
        if name not in shimmed:
            no_shim += 1
            continue
        by_cmd[name] += 1
        first = _is(e, root) and e.time == root_first
        bypassed.append(Bypassed(e, src, img, explain(e, lineage, dirs, zdotdir), first))
    through = sum(s.shim.values())
    commands = {n: (s.shim[n], by_cmd[n]) for n in shimmed if s.shim[n] or by_cmd[n]}
    state, note = _trace_state(s)
    sources = {  # what each source saw, before they are joined
        "shim": through,
        "trace": s.traced,
        "sampler": len(s.sampled),
        "parent": s.parent_seen,
    }
    net = (s.summary or {}).get("net")
    found = (s.summary or {}).get("files")
    counted = isinstance(found, int) and not isinstance(found, bool)
    records = found if isinstance(found, int) else 0
    files = "traced" if counted else "off" if isinstance(net, int) else "sampled"
    return SessionCoverage(
        sid, through + len(bypassed) + no_shim, through, tuple(bypassed), no_shim, commands,
        sources, state, note, zdotdir,
        contain if isinstance(contain := start.get("contain"), dict) else None,
        "traced" if isinstance(net, int) and not isinstance(net, bool) else "sampled",
        net if isinstance(net, int) else 0,
        files,
        records,
    )  # fmt: skip
