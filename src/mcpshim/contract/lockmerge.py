"""Adding a session's approval to a lock: what is new is added and said so, nothing is taken
away (a tool the session did not list stays approved), so approving is never a way to
forget what was approved before.

A tool whose definition differs from the approved one only in order (one order hash:
contract.canon) keeps its approved definition, and nothing is said. One that drifted
otherwise is accepted only when the caller says so (`approve --update`, after showing the
diff); else the approved definition stays and `drifted` names it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from mcpshim.contract.canon import short
from mcpshim.contract.lockfile import Boundary, Executable, Lock, ServerApproval, ToolApproval

__all__ = ["drifted", "merge", "roots"]


def roots(paths: Iterable[str]) -> tuple[str, ...]:
    """The fewest directories that cover every path (an ancestor covers its subtree)."""
    out: list[str] = []
    for c in sorted(set(paths)):
        if not any(c == r or c.startswith(r.rstrip("/") + "/") for r in out):
            out.append(c)
    return tuple(out)


def _union(a: Iterable[str], b: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({*a, *b}))


def _merge_boundary(old: Boundary, new: Boundary, what: str, said: list[str]) -> Boundary:
    execs = {e.path: e for e in old.executables}
    for e in new.executables:
        was = execs.get(e.path)
        if was is None:
            said.append(f"{what}: executable {e.path} ({short(e.sha256)}, {e.vouched})")
            execs[e.path] = e
            continue
        if e.sha256 and e.sha256 != was.sha256:
            said.append(f"{what}: {e.path} has a new identity: {short(e.sha256)}")
        for s in sorted(set(e.shapes) - set(was.shapes)):
            said.append(f"{what}: {e.path} {s or '(no subcommand)'}")
        for r in sorted(set(e.reached) - set(was.reached)):
            said.append(f"{what}: {e.path} reached from {r}")
        execs[e.path] = Executable(
            e.path,
            e.sha256 or was.sha256,
            e.vouched or was.vouched,
            _union(was.reached, e.reached),
            _union(was.shapes, e.shapes),
        )
    cwd = roots([*old.cwd_roots, *new.cwd_roots])
    for label, a, b in (
        ("cwd root", old.cwd_roots, cwd),
        ("destination", old.destinations, new.destinations),
        ("listens on", old.listens, new.listens),
        ("credential-like variable", old.credential_env, new.credential_env),
        ("runs as", old.users, new.users),
        ("reads credential file", old.credential_files, new.credential_files),
        ("writes what runs later", old.persistence, new.persistence),
        ("runs a file it wrote", old.ran_written, new.ran_written),
    ):
        for v in sorted(set(b) - set(a)):
            said.append(f"{what}: {label} {v}")
    if new.outlives and not old.outlives:
        said.append(f"{what}: may leave processes running after it answers")
    return Boundary(
        tuple(execs[p] for p in sorted(execs)),
        cwd,
        _union(old.destinations, new.destinations),
        _union(old.listens, new.listens),
        _union(old.credential_env, new.credential_env),
        _union(old.users, new.users),
        old.outlives or new.outlives,
        _union(old.credential_files, new.credential_files),
        _union(old.persistence, new.persistence),
        _union(old.ran_written, new.ran_written),
    )


def reordered(old: ToolApproval, new: ToolApproval) -> bool:
    """The same definition but for order (both hashes known and equal)."""
    return bool(old.order_sha256) and old.order_sha256 == new.order_sha256


def drifted(old: ServerApproval | None, new: ServerApproval) -> list[str]:
    """The tools of `new` whose definition drifted from `old`'s approval beyond order."""
    if old is None:
        return []
    return sorted(
        name
        for name, t in new.tools.items()
        if (was := old.tools.get(name)) is not None
        and was.sha256 != t.sha256
        and t.sha256
        and not reordered(was, t)
    )


def _merge_tool(
    old: ToolApproval | None, new: ToolApproval, said: list[str], update: bool
) -> ToolApproval:
    what = f"tool {new.name}"
    keep = new
    if old is None:
        kind = "called" if new.called else "definition only"
        said.append(f"{what}: new ({kind}), definition {short(new.sha256)}")
        old = replace(new, called=False, boundary=Boundary())
    elif old.sha256 != new.sha256 and new.sha256:
        if reordered(old, new) or not update:
            keep = old  # the approved definition stays (a reorder; a drift not accepted)
        else:
            said.append(f"{what}: definition {short(old.sha256)} -> {short(new.sha256)}")
    elif not new.sha256:
        keep = old  # called but not listed: its definition is not known here
    boundary = _merge_boundary(old.boundary, new.boundary, what, said)
    return ToolApproval(
        new.name,
        keep.sha256,
        keep.description,
        old.called or new.called,
        boundary,
        keep.order_sha256 or (new.order_sha256 if keep.sha256 == new.sha256 else ""),
        keep.definition or (new.definition if keep.sha256 == new.sha256 else ""),
    )


def merge(lock: Lock, new: ServerApproval, update: bool = True) -> tuple[Lock, list[str]]:
    """The lock with `new` approved in it, and a line for each thing this adds or changes.
    `update`: accept the drifted definitions (`drifted`) too; else they stay as approved."""
    said: list[str] = []
    old = lock.servers.get(new.name)
    if old is None:
        said.append(f"server {new.name}: new")
        old = ServerApproval(new.name)
    for label, a, b in (
        ("server version", old.server_version, new.server_version),
        ("protocol version", old.protocol_version, new.protocol_version),
        ("instructions and capabilities", short(old.server_sha256), short(new.server_sha256)),
    ):
        if b and a != b and old.server_sha256:
            said.append(f"server {new.name}: {label} {a} -> {b}")
    tools = dict(old.tools)
    for name, t in new.tools.items():
        tools[name] = _merge_tool(old.tools.get(name), t, said, update)
    for kind, was, now in (
        ("resource", old.resources, new.resources),
        ("prompt", old.prompts, new.prompts),
    ):
        for k, v in sorted(now.items()):
            if was.get(k) != v:
                said.append(f"{kind} {k}: {short(v)}" + (" (changed)" if k in was else " (new)"))
    startup = _merge_boundary(old.startup, new.startup, "outside tool calls", said)
    if new.program is not None and (old.program is None or old.program != new.program):
        p = new.program
        said.append(f"server {new.name}: program {p.path} ({short(p.sha256)}, {p.vouched})")
    merged = replace(
        new,
        program=new.program or old.program,
        command=new.command or old.command,
        startup=startup,
        tools=tools,
        resources={**old.resources, **new.resources},
        prompts={**old.prompts, **new.prompts},
    )
    servers = {**lock.servers, new.name: merged}
    return Lock(servers, lock.source), said
