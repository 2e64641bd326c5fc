"""What each record adds to a session's account of execs: the one rule every reader counts by.

A process's exec is seen by up to four sources; the ledger says, record by record in log
order, which record *is* an exec and which repeats one another source has (so every view
counts the same execs):

- a shim record is an exec, always (the shim hop is part of it, never an exec of its own);
- a `trace-exec` that succeeded is an exec, unless it is a half of a shim's exec (the
  shim script, then its target: `shim_script` / `via_shim`, which the tracer writes by
  pairing with the session's shim records, wherever the shims live); a failed attempt
  ran nothing (a PATH search's step, or a final failure): no exec;
- a `trace-gap` seen by the sampler or the supervisor is an exec no other source explains;
- an `observed` record (the sampler) is an exec in an untraced session; in a traced one
  it is *held* until the trace is settled: a trace summary means the tracer had the
  process (its gaps are the ones it missed), no summary at the session's end (the tracer
  failed) or at the end of what was read means the samples are all there is;
- a shim record's parent evidence (its shell's command line) is an exec only when
  nothing else saw that shell: no shim record of a shell and no sample with its identity
  among the latest `RECENT`, no sample of it later in the session, and (traced) no trace.

The state is small (held samples and pending parents per session, the latest `RECENT`
identities) and JSON-ready, so the session index keeps it between updates and counts
exactly as the readers that build processes do (family.model wraps this ledger).

The latest identities are the one state that crosses sessions: a session's own records
decide everything else. So a read of one session's records (log.scope) is told, by a
`Recall` in its stream, what the whole log's ledger found at each of the session's parent
checks (the session index keeps that), and where it starts reading everything, the
identities the whole log's ledger held there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcpshim.log.execlog import EventRecord
from mcpshim.log.shimhelper import is_shim_helper

__all__ = [
    "ENTRY",
    "HOLD",
    "NONE",
    "RECENT",
    "SHELLS",
    "Ledger",
    "Recall",
    "ident_key",
    "sample_is_helper",
    "trace_is_exec",
]

#: the shells whose children keep their command line (the shims' parent evidence)
SHELLS = frozenset({"sh", "dash", "bash", "zsh", "ksh", "mksh", "ash", "busybox"})
RECENT = 1024  # identities of shells and samples kept to recognise a parent
ENTRY, HOLD, NONE = "entry", "hold", "none"


def ident_key(boot: str, pid: Any, start: Any) -> str:
    return f"{boot}:{pid}:{start}"


def trace_is_exec(d: Mapping[str, Any]) -> bool:
    """A trace-exec record that is an exec of its own (module docstring)."""
    return (
        d.get("result") == "ok"
        and not d.get("shim_script")
        and not d.get("via_shim")
        and not d.get("shim_helper")  # the shim library's own (reading a parent's argv)
    )


def sample_is_helper(d: Mapping[str, Any]) -> bool:
    """An observed record of the shim library's own helper (caught alive by the sampler):
    mcpshim's work, no exec of the family's (its argv is ASCII: no `cmdline_b64`)."""
    raw = d.get("cmdline")
    if not isinstance(raw, list) or not all(isinstance(c, str) for c in raw):
        return False
    return is_shim_helper([c.encode("utf-8", "surrogateescape") for c in raw])


@dataclass(frozen=True, slots=True)
class Recall(EventRecord):
    """Not a record of the log: what a session's read (log.scope) tells the process model
    of the records it skipped (see the module docstring). `known`: the next parent check
    found the shell among the latest identities (or not); `recent`: those identities, from
    here on kept as usual. It has no kind and no session: every other reader passes it by,
    and nothing in a log can make one."""

    known: bool | None = None
    recent: tuple[str, ...] | None = None


@dataclass
class _Session:
    traced: bool = False  # its start said strace
    summary: bool = False  # a trace summary came: the trace is the truth
    ended: bool = False  # its end came: no sample can come after it
    entries: int = 0  # execs decided since this ledger was made (not kept in `state`)
    held: list[int] = field(default_factory=list)  # samples waiting for the trace
    pending: dict[str, list[int]] = field(default_factory=dict)  # parent key -> tokens

    def to_json(self) -> list[Any]:
        return [self.traced, self.summary, self.ended, self.held, self.pending]


class Ledger:
    """Fed records' facts in log order; each call says whether the record is an exec now
    (ENTRY), later (HOLD: a later call's `released` says), or never (NONE). A token names
    each held record."""

    def __init__(self, state: Mapping[str, Any] | None = None) -> None:
        self.sessions: dict[str, _Session] = {}
        self.recent: dict[str, None] = {}
        #: (token, is it an exec) of the held records the last call decided
        self.released: list[tuple[int, bool]] = []
        #: whether the last parent check found the shell among the latest identities
        self.known = False
        self._told: bool | None = None  # a Recall's answer for the next parent check
        self._token = 0
        if state:
            self.recent = dict.fromkeys(state.get("recent", ()))
            self._token = int(state.get("token", 0))
            for sid, (t, summary, ended, held, pending) in state.get("sessions", {}).items():
                self.sessions[sid] = _Session(
                    bool(t), bool(summary), bool(ended), 0, list(held),
                    {k: list(v) for k, v in pending.items()},
                )  # fmt: skip

    def state(self) -> dict[str, Any]:
        """What resumes this ledger (the session index keeps it)."""
        return {
            "recent": list(self.recent),
            "token": self._token,
            "sessions": {sid: s.to_json() for sid, s in self.sessions.items()},
        }

    def _get(self, sid: str) -> _Session:
        s = self.sessions.get(sid)
        if s is None:
            s = self.sessions[sid] = _Session()
        return s

    def _remember(self, key: str) -> None:
        recent = self.recent
        recent.pop(key, None)
        recent[key] = None
        if len(recent) > RECENT:
            del recent[next(iter(recent))]

    def _hold(self) -> int:
        self._token += 1
        return self._token

    def _release(self, s: _Session, entry: bool) -> None:
        for token in s.held:
            self.released.append((token, entry))
        for tokens in s.pending.values():
            for token in tokens:
                self.released.append((token, entry))
        if entry:
            s.entries += len(s.held) + sum(len(t) for t in s.pending.values())
        s.held, s.pending = [], {}

    # ---- the records -------------------------------------------------------------------

    def recall(self, rec: Recall) -> None:
        """What a session's read was told (see Recall)."""
        if rec.recent is not None:
            self.recent = dict.fromkeys(rec.recent)
        self._told = rec.known

    def prime(self, ident: str) -> None:
        """A shell's identity a parent check may find (one the ledger was not fed as a
        shim record: family.model's, the session index's)."""
        self._remember(ident)

    def start(self, sid: str, trace: Any) -> None:
        self.released = []
        s = self._get(sid)
        s.traced = s.traced or trace == "strace"

    def shim(self, sid: str, shim: str, ident: str, parent: str | None) -> tuple[str, int]:
        """A shim record (an exec: counted here); its parent evidence, when it has one
        (`parent`: the shell's identity key), decided as (ENTRY|HOLD|NONE, token)."""
        self.released = []
        s = self._get(sid)
        s.entries += 1
        if shim in SHELLS:
            self._remember(ident)
        if parent is None:
            return NONE, 0
        told, self._told = self._told, None
        self.known = parent in self.recent if told is None else told
        if self.known or s.summary:
            return NONE, 0
        if s.ended:
            s.entries += 1
            return ENTRY, 0  # the session is over: no sample of that shell can come now
        token = self._hold()
        s.pending.setdefault(parent, []).append(token)
        return HOLD, token

    def sample(self, sid: str, ident: str) -> tuple[str, int]:
        """An observed record."""
        self.released = []
        s = self._get(sid)
        self._remember(ident)
        for token in s.pending.pop(ident, ()):
            self.released.append((token, False))  # the sample is that shell
        if s.summary:
            return NONE, 0
        if not s.traced or s.ended:
            s.entries += 1
            return ENTRY, 0
        token = self._hold()
        s.held.append(token)
        return HOLD, token

    def counted(self, sid: str, entry: bool) -> str:
        """A record whose part it decides itself (a trace-exec, a trace-gap)."""
        self.released = []
        if entry:
            self._get(sid).entries += 1
            return ENTRY
        return NONE

    def summary(self, sid: str) -> None:
        """A trace summary: the tracer had every held sample and pending shell."""
        self.released = []
        s = self._get(sid)
        s.summary = s.traced = True
        self._release(s, False)

    def end(self, sid: str) -> None:
        """The session's end: without a summary, what waited is all there is."""
        self.released = []
        s = self._get(sid)
        s.ended = True
        self._release(s, True)

    def finish(self) -> None:
        """The end of what was read: everything still waiting is an exec."""
        self.released = []
        for s in self.sessions.values():
            self._release(s, True)

    def waiting(self, sid: str) -> int:
        """What `finish` would add for a session (the index answers without finishing)."""
        s = self.sessions.get(sid)
        return 0 if s is None else len(s.held) + sum(len(t) for t in s.pending.values())
