"""MCP client config files: the four shapes users actually have, read with positions.

Claude Desktop (`claude_desktop_config.json`), Claude Code (`.mcp.json`) and Cursor
(`.cursor/mcp.json`) keep servers under `mcpServers`; VS Code (`.vscode/mcp.json`, or the
user-level `mcp.json`) keeps them under `servers` and allows comments and trailing commas.
Every file goes through the position-keeping parser in `jsonc`, so an error names the file,
line and column, and wrap-config can edit the exact spans it read.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mcpshim.base.fdio import read_regular
from mcpshim.errors import InputError, UsageError
from mcpshim.pathcheck import jsonc

__all__ = [
    "CLIENT_LABELS",
    "EffectivePath",
    "McpConfig",
    "ServerEntry",
    "detect_client",
    "effective_path",
    "expand_vars",
    "load_config",
    "parse_config",
]

CLIENT_LABELS = {
    "claude-desktop": "Claude Desktop",
    "claude-code": "Claude Code",
    "cursor": "Cursor",
    "vscode": "VS Code",
    "generic": "MCP client (mcpServers)",
}


@dataclass(frozen=True)
class ServerEntry:
    """One configured server, with the node it was read from (for edits and line numbers)."""

    name: str
    node: jsonc.Node
    line: int
    command: str | None
    args: tuple[str, ...]
    env: Mapping[str, str]
    url: str | None
    headers: Mapping[str, str]

    @property
    def stdio(self) -> bool:
        return self.command is not None


@dataclass(frozen=True)
class McpConfig:
    path: Path
    client: str
    servers_key: str
    raw: bytes
    document: jsonc.Document
    servers: tuple[ServerEntry, ...]
    servers_node: jsonc.Node

    @property
    def label(self) -> str:
        return CLIENT_LABELS[self.client]

    @functools.cached_property
    def _by_name(self) -> Mapping[str, ServerEntry]:
        return {s.name: s for s in self.servers}

    def server(self, name: str) -> ServerEntry:
        found = self._by_name.get(name)
        if found is not None:
            return found
        known = ", ".join(s.name for s in self.servers) or "none"
        raise UsageError(f"{self.path}: no server named {name!r} (servers: {known})")

    def workspace(self) -> Path | None:
        """The project folder a project-level config belongs to (for ${workspaceFolder})."""
        path = Path(os.path.abspath(self.path))
        if path.parent.name in (".vscode", ".cursor"):
            return path.parent.parent
        if path.name == ".mcp.json":
            return path.parent
        return None


def detect_client(path: Path, root: jsonc.Node) -> tuple[str, str]:
    """(client, servers key) from the file's name and place, then from its shape."""
    has_mcp = root.get("mcpServers") is not None
    has_servers = root.get("servers") is not None
    name, parent = path.name, path.parent.name
    if has_servers and not has_mcp:
        return "vscode", "servers"
    if not has_mcp:
        raise InputError(
            f"{path}: no `mcpServers` (Claude Desktop, Claude Code, Cursor) "
            "or `servers` (VS Code) object at the top level"
        )
    if name == "claude_desktop_config.json":
        return "claude-desktop", "mcpServers"
    if name == ".mcp.json":
        return "claude-code", "mcpServers"
    if name == "mcp.json" and parent == ".cursor":
        return "cursor", "mcpServers"
    return "generic", "mcpServers"


def _where(path: Path, pos: jsonc.Positions, offset: int) -> str:
    line, col = pos(offset)
    return f"{path}:{line}:{col}"


def _strings(path: Path, pos: jsonc.Positions, node: jsonc.Node, what: str) -> dict[str, str]:
    if node.kind != "object":
        raise InputError(f"{_where(path, pos, node.start)}: {what} must be an object")
    out: dict[str, str] = {}
    for m in node.members:
        if m.value.kind == "null":
            continue
        if m.value.kind != "string":
            raise InputError(f"{_where(path, pos, m.value.start)}: {what}.{m.key} must be a string")
        out[m.key] = m.value.value
    return out


def _entry(path: Path, pos: jsonc.Positions, name: str, node: jsonc.Node) -> ServerEntry:
    where = _where(path, pos, node.start)
    if node.kind != "object":
        raise InputError(f"{where}: server {name!r} must be an object")
    command = node.get("command")
    if command is not None and command.kind != "string":
        raise InputError(f"{_where(path, pos, command.start)}: {name}.command must be a string")
    args_node = node.get("args")
    args: tuple[str, ...] = ()
    if args_node is not None:
        if args_node.kind != "array" or any(i.kind != "string" for i in args_node.items):
            raise InputError(
                f"{_where(path, pos, args_node.start)}: {name}.args must be an array of strings"
            )
        args = tuple(args_node.value)
    env_node = node.get("env")
    env = {} if env_node is None else _strings(path, pos, env_node, f"{name}.env")
    headers_node = node.get("headers")
    headers = {} if headers_node is None else _strings(path, pos, headers_node, f"{name}.headers")
    url = node.get("url")
    return ServerEntry(
        name=name,
        node=node,
        line=pos(node.start)[0],
        command=command.value if command is not None else None,
        args=args,
        env=env,
        url=url.value if url is not None and url.kind == "string" else None,
        headers=headers,
    )


def _unicode_only(path: Path, pos: jsonc.Positions, node: jsonc.Node) -> None:
    """Refuse a lone surrogate (`"\\ud800"`) in a server's names or values: JSON allows the
    escape, but it is not Unicode text, so it can be neither passed to a program nor
    printed; saying where (the first one in the file) beats a traceback later."""
    bad: list[tuple[int, str]] = []
    todo = [node]
    while todo:
        n = todo.pop()
        spots = [(m.key_start, m.key) for m in n.members]
        if n.kind == "string":
            spots.append((n.start, n.value))
        for offset, text in spots:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                bad.append((offset, text[exc.start].encode("unicode_escape").decode()))
        todo += [m.value for m in n.members]
        todo += n.items
    if bad:
        offset, char = min(bad)
        raise InputError(
            f"{_where(path, pos, offset)}: a lone surrogate ({char}) in a string: "
            "not Unicode text, so no client could pass it to a program"
        )


def parse_config(path: Path, raw: bytes) -> McpConfig:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(f"{path}:{line}:{col}: not UTF-8 text") from None
    try:
        doc = jsonc.parse(text)
    except jsonc.JsoncError as exc:
        raise InputError(f"{path}:{exc.line}:{exc.column}: {exc.reason}") from None
    pos = jsonc.Positions(text)
    if doc.root.kind != "object":
        raise InputError(f"{_where(path, pos, doc.root.start)}: the top level must be an object")
    client, key = detect_client(path, doc.root)
    servers_node = doc.root.get(key)
    assert servers_node is not None
    if servers_node.kind != "object":
        raise InputError(f"{_where(path, pos, servers_node.start)}: {key} must be an object")
    _unicode_only(path, pos, servers_node)
    entries: dict[str, ServerEntry] = {}
    for m in servers_node.members:
        entries[m.key] = _entry(path, pos, m.key, m.value)  # the last one wins, as in JSON
    return McpConfig(path, client, key, raw, doc, tuple(entries.values()), servers_node)


def load_config(path: Path) -> McpConfig:
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a config file")
    try:
        raw = read_regular(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a config file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_config(path, raw)


_VSCODE_VAR = re.compile(r"\$\{(env:([A-Za-z_][A-Za-z0-9_]*)|userHome|workspaceFolder)\}")
_CLAUDE_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_vars(
    value: str, config: McpConfig, environ: Mapping[str, str]
) -> tuple[str, tuple[str, ...]]:
    """Expand the variables the client itself would expand; return the names used."""
    used: list[str] = []
    if config.client in ("vscode", "cursor"):

        def vs(m: re.Match[str]) -> str:
            used.append(m.group(0))
            if m.group(2):
                return environ.get(m.group(2), "")
            if m.group(1) == "userHome":
                return environ.get("HOME", "")
            ws = config.workspace()
            return str(ws) if ws else m.group(0)

        return _VSCODE_VAR.sub(vs, value), tuple(used)
    if config.client == "claude-code":

        def cc(m: re.Match[str]) -> str:
            used.append(m.group(0))
            got = environ.get(m.group(1))
            return got if got is not None else (m.group(2) or "")

        return _CLAUDE_VAR.sub(cc, value), tuple(used)
    return value, ()


@dataclass(frozen=True)
class EffectivePath:
    value: str
    source: str
    from_config: bool


def effective_path(
    config: McpConfig, server: ServerEntry, environ: Mapping[str, str] | None = None
) -> EffectivePath:
    """The PATH the server starts with: its env.PATH, else the one its client passes on.

    The clients hand their own environment's PATH to a stdio server unless env.PATH is set
    (the official TypeScript SDK passes PATH through explicitly); mcpshim assumes that
    environment is this process's one and says so, since a GUI client started from a
    desktop session may see a different PATH than a shell.
    """
    env = os.environ if environ is None else environ
    if "PATH" in server.env:
        value, used = expand_vars(server.env["PATH"], config, env)
        how = f" (expanded {', '.join(used)})" if used else ""
        return EffectivePath(value, f"env.PATH in {config.path.name}{how}", True)
    return EffectivePath(
        env.get("PATH", ""),
        f"{config.label} passes on its own PATH; assumed to be this process's PATH",
        False,
    )
