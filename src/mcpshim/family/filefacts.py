"""The file facts of a process, said in the words every reader uses (review's findings, the
approval cards, ECS): a credential file read, a place that runs later written, a file the
session wrote then run, a program run after its parent read the project's configuration
(log.filerecords types the `trace-file` records).

The words are raw text: each renderer escapes them its way, as it does every string a
process chose.
"""

from __future__ import annotations

from mcpshim.log.filerecords import FileRecord

__all__ = [
    "CONFIGURED",
    "CREDENTIAL",
    "METADATA",
    "PERSISTENCE",
    "RAN_WRITTEN",
    "kind_of",
    "phrase",
    "verb",
]

CREDENTIAL, PERSISTENCE, RAN_WRITTEN, METADATA, CONFIGURED = (
    "credential",
    "persistence",
    "ran-written",
    "metadata",
    "configured",
)
_VERBS = {
    "write": "wrote",
    "create": "created",
    "truncate": "truncated",
    "append": "appended to",
    "rename": "renamed a file to",
    "link": "linked a file to",
    "mode": "made executable",
}


def kind_of(f: FileRecord) -> str:
    """credential, persistence, ran-written, configured (a program run after its parent
    read the project's configuration) or metadata (a contained session's change outside
    its write directories)."""
    if f.change == "run" and f.configured is not None:
        return CONFIGURED
    if f.change == "run":
        return RAN_WRITTEN
    if f.persistence is not None:
        return PERSISTENCE
    if f.credential is not None:
        return CREDENTIAL
    return METADATA


def verb(f: FileRecord) -> str:
    """What the call did to the file, as a verb ("read", "appended to")."""
    if f.change == "open":
        return {"write": "opened for writing", "read-write": "opened for reading and writing"}.get(
            f.access or "read", "read"
        )
    return _VERBS.get(f.change, f.change)


def phrase(f: FileRecord) -> str:
    """What the call did, in the words every reader uses (no call named: review names the
    writer's call in its finding)."""
    kind = kind_of(f)
    path = f.shown
    if kind == RAN_WRITTEN:
        how = f" (as the script {f.interpreter} was given)" if f.interpreter else ""
        return f"ran {path}{how}, a file the session wrote"
    if kind == CONFIGURED and f.configured is not None:
        read = ", ".join(p.decode("utf-8", "surrogateescape") for p in f.configured.paths)
        return f"ran {path} after pid {f.configured.pid} read the project's {read}"
    label = f.credential if kind == CREDENTIAL else f.persistence
    what = f"{verb(f)} {path} ({label})" if label else f"changed the {f.change} of {path}"
    if f.blocked:
        return f"was refused: {what.replace('read ', 'reading ', 1)} ({f.result})"
    if not f.ok:
        return f"tried: {what} ({f.result})"
    return what
