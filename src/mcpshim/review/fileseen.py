"""What each owner of a relayed session did with files that matter (the tracer's
`trace-file` records): the credential files it read, the places that run later it wrote, the
files the session wrote that it ran. Approval cards list them, the lock keeps them, and
`review --lock` reports one the card does not list as a departure (the same rule as a plain
review: MCS413, MCS414, MCS415).

A fact belongs to the call in flight when it happened (family.attribution.owner_at),
whichever process made it, the server's own included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from mcpshim.contract.lockfile import Boundary
from mcpshim.family.attribution import Attribution, Owner
from mcpshim.family.filefacts import CREDENTIAL, PERSISTENCE, RAN_WRITTEN, kind_of, phrase
from mcpshim.family.tree import Node
from mcpshim.log.filerecords import FileRecord
from mcpshim.review.findings import Evidence, Finding, Rule, Severity
from mcpshim.review.rules.contain_rules import BLOCKED
from mcpshim.review.rules.file_rules import CREDENTIAL_READ, PERSISTENCE_WRITE, RAN_WRITTEN_FILE

__all__ = ["FileSeen", "Make", "file_departures", "file_owners"]

#: (rule, message, evidence, key, severity) -> a departure where departures.py files it
Make = Callable[[Rule, str, list[Evidence], str, Severity | None], Finding]


@dataclass(frozen=True)
class Fact:
    record: FileRecord
    node: Node | None  # None: a process the attribution does not know


@dataclass
class FileSeen:
    """One owner's file facts by path: the first fact of each (the proof)."""

    credentials: dict[str, Fact] = field(default_factory=dict)
    persistence: dict[str, Fact] = field(default_factory=dict)
    ran_written: dict[str, Fact] = field(default_factory=dict)
    refused: dict[str, Fact] = field(default_factory=dict)  # reads a contained session refused

    def add(self, f: FileRecord, node: Node | None) -> None:
        kind = kind_of(f)
        if f.blocked and kind == CREDENTIAL:
            self.refused.setdefault(f.shown, Fact(f, node))
            return
        into = {CREDENTIAL: self.credentials, PERSISTENCE: self.persistence,
                RAN_WRITTEN: self.ran_written}.get(kind)  # fmt: skip
        if into is None or not f.ok or f.blocked:
            return
        into.setdefault(f.shown, Fact(f, node))

    def said(self, facts: dict[str, Fact]) -> list[str]:
        """Each fact as the card says it: "/h/.ssh/id_ed25519 (SSH private key)"."""
        out = []
        for path, fact in sorted(facts.items()):
            label = fact.record.credential or fact.record.persistence
            out.append(f"{path} ({label})" if label else path)
        return out


def file_owners(
    att: Attribution, records: Iterable[FileRecord]
) -> Iterator[tuple[FileRecord, Owner, Node | None]]:
    """Each fact of the session with the owner of its moment and its process."""
    nodes = {(n.boot_id, n.pid, n.start): n for n in att.nodes()}
    for f in records:
        node = nodes.get(f.identity)
        owner = att.owner_at(None if node is att.server else node, f.time)
        yield f, owner, node


def _ev(fact: Fact) -> list[Evidence]:
    f, node = fact.record, fact.node
    who = f"{node.current.command} (pid {node.pid})" if node is not None else f"pid {f.pid}"
    data = {"command": node.current.command if node is not None else "", "path": f.shown,
            "file": f.shown, "pid": f.pid, "start_ticks": f.start,
            "boot_id": f.boot_id}  # fmt: skip
    return [Evidence(f.where, f"{who} {phrase(f)}", data)]


def file_departures(seen: FileSeen, approved: Boundary, make: Make) -> Iterator[Finding]:
    """What one owner did with files that its approved boundary does not list, and the
    reads a contained session refused (MCS410, as plain review says them)."""
    for path, fact in sorted(seen.refused.items()):
        msg = f"blocked by the lock: {_ev(fact)[0].text.replace('was refused: ', '', 1)}"
        yield make(BLOCKED, msg, _ev(fact), f"read\0{path}", None)
    for path, fact in sorted(seen.credentials.items()):
        if path not in approved.credential_files:
            sev = Severity.HIGH if fact.record.private_key else None
            msg = f"{phrase(fact.record)}, which its card does not list"
            yield make(CREDENTIAL_READ, msg, _ev(fact), f"read\0{path}", sev)
    for path, fact in sorted(seen.persistence.items()):
        if path not in approved.persistence:
            msg = f"{phrase(fact.record)}, which its card does not list"
            yield make(PERSISTENCE_WRITE, msg, _ev(fact), f"persist\0{path}", None)
    for path, fact in sorted(seen.ran_written.items()):
        if path not in approved.ran_written:
            msg = f"{phrase(fact.record)}, which its card does not list"
            yield make(RAN_WRITTEN_FILE, msg, _ev(fact), f"ran\0{path}", None)
