"""`mcpshim.lock`: what was approved, per server: the contract and each tool's boundary.

A lock is TOML written by tomli-w, versioned (`version = 1`), with every table and list in a
fixed order, so writing what was read gives the same bytes and a diff of two locks reads as
a diff of two approvals. It is meant to be committed next to a project's `.mcp.json`, like
a package lock. docs/lock-format.md documents every key.

(`contract.lockmerge` adds a session's approval to a lock.) Its machinery is shared with
the baseline (review.baseline, MCS115-117), the other record of what a session ran: a
document written whole with what a terminal or a diff would act on escaped (`toml_text`,
`toml_str`, `write_toml`), read back with every key checked (`Reader`).

`find_lock` and `default_path` say where a lock is looked for: from here up, the first
directory that holds a lock or a client config (`.mcp.json`, `.cursor/mcp.json` or
`.vscode/mcp.json`), then the user's config directory; a new lock goes next to the nearest
client config, else here, so the `mcpshim.lock` that `approve` just wrote is the one
`--lock mcpshim.lock` and `--lock` name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
import tomli_w

from mcpshim.base.display import unsafe_char
from mcpshim.base.fdio import read_regular
from mcpshim.base.safewrite import write_file
from mcpshim.base.tomlfile import parse_toml, without_bom
from mcpshim.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "CLIENT_CONFIGS",
    "LOCK_NAME",
    "VERSION",
    "Boundary",
    "Executable",
    "Lock",
    "Reader",
    "ServerApproval",
    "ToolApproval",
    "default_path",
    "dumps_lock",
    "find_lock",
    "load_lock",
    "loads_lock",
    "save_lock",
    "select_server",
    "toml_str",
    "toml_strs",
    "toml_text",
    "write_toml",
]

VERSION = 1
LOCK_NAME = "mcpshim.lock"
CLIENT_CONFIGS = (".mcp.json", ".cursor/mcp.json", ".vscode/mcp.json")
_HEAD = (
    "# mcpshim.lock: MCP servers approved with `mcpshim approve`: what each tool says (its\n"
    "# definition hash) and what it was seen to do (executables, cwd roots, destinations).\n"
    "# `mcpshim review --lock` reports departures from it. Format: docs/lock-format.md\n"
)


@dataclass(frozen=True)
class Executable:
    """One executable a tool ran, and how the approval knew it."""

    path: str
    sha256: str = ""  # content hash when approved ("" unreadable)
    vouched: str = ""  # who vouches for it (a package) or why nobody does
    reached: tuple[str, ...] = ()  # PATH, absolute path, project file ..., git hook
    shapes: tuple[str, ...] = ()  # subcommands / argument shapes


@dataclass(frozen=True)
class Boundary:
    """What a tool (or the server outside any tool call) was seen to do."""

    executables: tuple[Executable, ...] = ()
    cwd_roots: tuple[str, ...] = ()
    destinations: tuple[str, ...] = ()
    listens: tuple[str, ...] = ()
    credential_env: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    outlives: bool = False
    #: credential files its processes opened (log.filetable), persistent places they
    #: wrote, files the session wrote that they ran
    credential_files: tuple[str, ...] = ()
    persistence: tuple[str, ...] = ()
    ran_written: tuple[str, ...] = ()

    def executable(self, path: str) -> Executable | None:
        return next((e for e in self.executables if e.path == path), None)


@dataclass(frozen=True)
class ToolApproval:
    name: str
    sha256: str
    description: str = ""
    called: bool = False  # False: approved on its definition only
    boundary: Boundary = field(default_factory=Boundary)
    order_sha256: str = ""  # the definition's hash with order taken out (contract.canon)
    definition: str = ""  # the rest of the definition, canonical JSON (contract.drift)


@dataclass(frozen=True)
class ServerApproval:
    name: str
    command: tuple[str, ...] = ()
    server_name: str = ""
    server_version: str = ""
    protocol_version: str = ""
    server_sha256: str = ""  # instructions and capabilities
    instructions: str = ""
    session: str = ""
    approved: str = ""
    program: Executable | None = None  # the server's own executable
    startup: Boundary = field(default_factory=Boundary)
    tools: Mapping[str, ToolApproval] = field(default_factory=dict)
    resources: Mapping[str, str] = field(default_factory=dict)  # uri -> sha256
    prompts: Mapping[str, str] = field(default_factory=dict)  # name -> sha256


@dataclass(frozen=True)
class Lock:
    servers: Mapping[str, ServerApproval] = field(default_factory=dict)
    source: str = ""


# ---- writing -------------------------------------------------------------------------------


def toml_str(s: str) -> str:
    """TOML holds no lone surrogate (a byte that was not UTF-8): keep it as \\xNN text."""
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def toml_strs(values: Iterable[str]) -> list[str]:
    return [toml_str(v) for v in values]


def _exec_doc(e: Executable) -> dict[str, Any]:
    return {
        "path": toml_str(e.path),
        "sha256": e.sha256,
        "vouched": toml_str(e.vouched),
        "reached": toml_strs(e.reached),
        "shapes": toml_strs(e.shapes),
    }


def _boundary_doc(b: Boundary) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "users": toml_strs(b.users),
        "cwd_roots": toml_strs(b.cwd_roots),
        "destinations": toml_strs(b.destinations),
        "listens": toml_strs(b.listens),
        "credential_env": toml_strs(b.credential_env),
        "outlives": b.outlives,
    }
    for key in ("credential_files", "persistence", "ran_written"):
        if getattr(b, key):  # (written only when seen: older locks stay byte for byte)
            doc[key] = toml_strs(getattr(b, key))
    if b.executables:
        doc["executables"] = [_exec_doc(e) for e in b.executables]
    return doc


def _server_doc(s: ServerApproval) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "command": toml_strs(s.command),
        "session": toml_str(s.session),
        "approved": s.approved,
        "server_name": toml_str(s.server_name),
        "server_version": toml_str(s.server_version),
        "protocol_version": toml_str(s.protocol_version),
        "server_sha256": s.server_sha256,
        "instructions": toml_str(s.instructions),
        "resources": {toml_str(k): v for k, v in sorted(s.resources.items())},
        "prompts": {toml_str(k): v for k, v in sorted(s.prompts.items())},
    }
    if s.program is not None:
        doc["program"] = _exec_doc(s.program)
    doc["startup"] = _boundary_doc(s.startup)
    doc["tools"] = {
        toml_str(name): {
            "sha256": t.sha256,
            "order_sha256": t.order_sha256,
            "description": toml_str(t.description),
            "definition": toml_str(t.definition),
            "called": t.called,
            **_boundary_doc(t.boundary),
        }
        for name, t in sorted(s.tools.items())
    }
    return doc


def _escaped(text: str) -> str:
    """What a terminal or a diff would act on or hide (bidi controls such as U+202E, C1
    controls such as U+009B, U+0085, U+2028) as TOML escapes, which a TOML reader turns back
    into the same characters. tomli-w escapes C0 controls (a newline is left only between
    lines); every other such character can only stand inside a quoted string (a key or a
    value), where an escape means itself."""
    if text.isascii():
        return text
    return "".join(_toml_escape(c) if c != "\n" and unsafe_char(c) else c for c in text)


def _toml_escape(c: str) -> str:
    return f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"


def toml_text(head: str, doc: Mapping[str, Any]) -> str:
    """`head` (comment lines) and the document as tomli-w writes it, escaped (`_escaped`)."""
    return head + _escaped(tomli_w.dumps(doc))


def dumps_lock(lock: Lock) -> str:
    servers = {toml_str(k): _server_doc(v) for k, v in sorted(lock.servers.items())}
    return toml_text(_HEAD, {"version": VERSION, "servers": servers})


def write_toml(
    path: Path, text: str, what: str, mode: int | None = None, parents: bool = False
) -> None:
    """Write the whole file or nothing (a temporary file renamed over it); `what` names
    the file in the error (`parents`: make its directory first)."""
    try:
        if parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, text.encode("utf-8"), mode)
    except OSError as exc:
        raise InputError(f"{path}: cannot write {what}: {exc.strerror}") from None


def save_lock(lock: Lock, path: Path) -> None:
    write_toml(path, dumps_lock(lock), "the lock", 0o644, parents=True)


# ---- reading -------------------------------------------------------------------------------


class Reader:
    """Typed values out of a TOML document; `bad(key, what)` is the error for a key whose
    value is not `what` (the lock names the file and key, the baseline the line too)."""

    def __init__(self, bad: Callable[[str, str], InputError]) -> None:
        self.bad = bad

    def table(self, value: Any, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.bad(key, "a table")
        return value

    def text(self, t: Mapping[str, Any], k: str, key: str) -> str:
        v = t.get(k, "")
        if not isinstance(v, str):
            raise self.bad(_at(key, k), "a string")
        return v

    def strs(self, t: Mapping[str, Any], k: str, key: str) -> tuple[str, ...]:
        v = t.get(k, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.bad(_at(key, k), "a list of strings")
        return tuple(v)

    def flag(self, t: Mapping[str, Any], k: str, key: str) -> bool:
        v = t.get(k, False)
        if not isinstance(v, bool):
            raise self.bad(_at(key, k), "true or false")
        return v

    def hashes(self, t: Mapping[str, Any], k: str, key: str) -> dict[str, str]:
        v = self.table(t.get(k, {}), _at(key, k))
        if not all(isinstance(x, str) for x in v.values()):
            raise self.bad(_at(key, k), "a table of strings")
        return dict(v)

    def executable(self, item: Any, k: str) -> Executable:
        e = self.table(item, k)
        if not self.text(e, "path", k):
            raise self.bad(f"{k}.path", "a path")
        return Executable(
            self.text(e, "path", k),
            self.text(e, "sha256", k),
            self.text(e, "vouched", k),
            self.strs(e, "reached", k),
            self.strs(e, "shapes", k),
        )

    def boundary(self, t: Mapping[str, Any], key: str) -> Boundary:
        execs = t.get("executables", [])
        if not isinstance(execs, list):
            raise self.bad(f"{key}.executables", "an array of tables")
        out = [self.executable(item, f"{key}.executables[{i}]") for i, item in enumerate(execs)]
        return Boundary(
            tuple(out),
            self.strs(t, "cwd_roots", key),
            self.strs(t, "destinations", key),
            self.strs(t, "listens", key),
            self.strs(t, "credential_env", key),
            self.strs(t, "users", key),
            self.flag(t, "outlives", key),
            self.strs(t, "credential_files", key),
            self.strs(t, "persistence", key),
            self.strs(t, "ran_written", key),
        )

    def server(self, name: str, t: Mapping[str, Any]) -> ServerApproval:
        key = f"servers.{name}"
        tools: dict[str, ToolApproval] = {}
        for tname, item in self.table(t.get("tools", {}), f"{key}.tools").items():
            k = f"{key}.tools.{tname}"
            tt = self.table(item, k)
            tools[tname] = ToolApproval(
                tname,
                self.text(tt, "sha256", k),
                self.text(tt, "description", k),
                self.flag(tt, "called", k),
                self.boundary(tt, k),
                self.text(tt, "order_sha256", k),
                self.text(tt, "definition", k),
            )
        return ServerApproval(
            name,
            self.strs(t, "command", key),
            self.text(t, "server_name", key),
            self.text(t, "server_version", key),
            self.text(t, "protocol_version", key),
            self.text(t, "server_sha256", key),
            self.text(t, "instructions", key),
            self.text(t, "session", key),
            self.text(t, "approved", key),
            self.executable(t["program"], f"{key}.program") if "program" in t else None,
            self.boundary(self.table(t.get("startup", {}), f"{key}.startup"), f"{key}.startup"),
            tools,
            self.hashes(t, "resources", key),
            self.hashes(t, "prompts", key),
        )


def _at(key: str, k: str) -> str:
    return f"{key}.{k}" if key else k


def loads_lock(text: str, source: str = "mcpshim.lock") -> Lock:
    text = without_bom(text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{source}: not a valid lock: {exc}") from None
    except (RecursionError, ValueError):  # 5,000 levels, 5,000 digits: said with the line
        data = parse_toml(text, Path(source), "lock")
    if data.get("version") != VERSION:
        raise InputError(
            f"{source}: lock key version: expected {VERSION} (this mcpshim reads version "
            f"{VERSION} locks), found {data.get('version')!r}"
        )
    r = Reader(lambda key, what: InputError(f"{source}: lock key {key}: expected {what}"))
    servers = r.table(data.get("servers", {}), "servers")
    return Lock({n: r.server(n, r.table(t, f"servers.{n}")) for n, t in servers.items()}, source)


def load_lock(path: Path) -> Lock:
    try:
        text = read_regular(path).decode("utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the lock: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a valid lock: {exc}") from None
    return loads_lock(text, str(path))


# ---- where a lock lives --------------------------------------------------------------------


def user_lock() -> Path:
    return Path(platformdirs.user_config_dir("mcpshim")) / LOCK_NAME


def find_lock(start: Path | None = None) -> Path | None:
    """The lock to read: from `start` (the current directory) up, the first directory that
    holds a lock or a client config; then the user config dir. None when there is none."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        lock = d / LOCK_NAME
        if lock.is_file():
            return lock
        if any((d / c).is_file() for c in CLIENT_CONFIGS):
            break
    user = user_lock()
    return user if user.is_file() else None


def default_path(start: Path | None = None) -> Path:
    """Where `approve` writes: the lock `find_lock` finds, else a new one next to the nearest
    client config, else in the current directory (like a package lock: the project's own)."""
    found = find_lock(start)
    if found is not None:
        return found
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if any((d / c).is_file() for c in CLIENT_CONFIGS):
            return d / LOCK_NAME
    return here / LOCK_NAME


def select_server(
    lock: Lock, run_name: str = "", command: Iterable[str] = (), server_name: str = ""
) -> ServerApproval | None:
    """The approval a session is held to: by `run --name`, else by command line, else by the
    name the server gave itself in `initialize`."""
    if run_name and run_name in lock.servers:
        return lock.servers[run_name]
    argv = tuple(command)
    if argv:
        hit = [s for s in lock.servers.values() if s.command == argv]
        if len(hit) == 1:
            return hit[0]
    if server_name:
        if server_name in lock.servers:
            return lock.servers[server_name]
        hit = [s for s in lock.servers.values() if s.server_name == server_name]
        if len(hit) == 1:
            return hit[0]
    return None


# ---- merging -------------------------------------------------------------------------------
