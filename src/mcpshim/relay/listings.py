"""What a server says about itself, as the recorder files it: the `initialize` exchange and
each `tools/list`, `resources/list` and `prompts/list` result.

These are the contract an approval pins (contract.canon): each listed item is recorded by
name with the hash of its canonical definition, a tool also with its order hash (the same
items in any order hash alike: contract.canon) and its definition, its
texts redacted like any text the relay records (descriptions are cut at DESCRIPTION_MAX
rather than relay.redact's 2 KiB, so a change deep in a long description still shows in a
diff). The hash is of the definition as the server sent it, before redaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcpshim.contract.canon import definition, definition_hash, digest, order_hash
from mcpshim.log.redact import redact_text
from mcpshim.relay.redact import redact_json

__all__ = [
    "DESCRIPTION_MAX",
    "LISTED",
    "contract_event",
    "initialize_payload",
    "list_payload",
    "redact_long",
]

DESCRIPTION_MAX = 16 << 10
#: request method -> (event kind, the result key holding the items, definition kind)
LISTED: Mapping[str, tuple[str, str, str]] = {
    "tools/list": ("mcp-tools", "tools", "tool"),
    "resources/list": ("mcp-resources", "resources", "resource"),
    "prompts/list": ("mcp-prompts", "prompts", "prompt"),
}


def redact_long(text: str, hits: list[str]) -> str:
    """A long text (a description, the server's instructions), redacted and cut."""
    head = text[:DESCRIPTION_MAX]
    raw = head.encode("utf-8", "surrogatepass")
    out = redact_text(raw, hits).decode("utf-8", "surrogatepass")
    if len(text) > DESCRIPTION_MAX:
        hits.append("truncated")
        out += f"...[{len(text) - DESCRIPTION_MAX} more characters not recorded]"
    return out


def _tool(item: Mapping[str, Any], hits: list[str]) -> dict[str, Any]:
    d = definition("tool", item)
    shown = {k: redact_json(v, hits) for k, v in d.items() if k != "description"}
    if isinstance(d.get("description"), str):
        shown["description"] = redact_long(d["description"], hits)
    return {
        "name": shown.get("name"),
        "sha256": definition_hash("tool", item),
        "order_sha256": order_hash("tool", item),  # the same, order taken out (canon)
        "definition": shown,
    }


def _item(kind: str, item: Mapping[str, Any], hits: list[str]) -> dict[str, Any]:
    name = item.get("uri" if kind == "resource" else "name")
    return {
        "name": redact_json(name, hits) if isinstance(name, str) else None,
        "sha256": definition_hash(kind, item),
    }


def list_payload(method: str, result: Any, cursor: Any) -> dict[str, Any]:
    """The record of one page of a list result (`cursor`: the request's, None on page one)."""
    _kind, key, what = LISTED[method]
    res = result if isinstance(result, dict) else {}
    items = res.get(key)
    hits: list[str] = []
    rows = [
        _tool(i, hits) if what == "tool" else _item(what, i, hits)
        for i in (items if isinstance(items, list) else [])
        if isinstance(i, dict)
    ]
    nxt = res.get("nextCursor")
    out: dict[str, Any] = {
        "method": method,
        key: rows,
        "cursor": cursor if isinstance(cursor, str) else None,
        "next_cursor": nxt if isinstance(nxt, str) else None,
    }
    if hits:
        out["redacted"] = sorted(set(hits))
    return out


def _table(doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def initialize_payload(params: Any, result: Any) -> dict[str, Any]:
    """The initialize exchange: who the server says it is, what it offers, and its
    instructions to the model (redacted) with the hash of instructions and capabilities."""
    res = result if isinstance(result, dict) else {}
    req = params if isinstance(params, dict) else {}
    info, client, caps = (
        _table(res, "serverInfo"),
        _table(req, "clientInfo"),
        _table(res, "capabilities"),
    )
    hits: list[str] = []
    out: dict[str, Any] = {
        "server_name": redact_json(_text(info.get("name")), hits),
        "server_version": redact_json(_text(info.get("version")), hits),
        "protocol_version": _text(res.get("protocolVersion")),
        "client_name": redact_json(_text(client.get("name")), hits),
        "client_version": redact_json(_text(client.get("version")), hits),
        "capabilities": redact_json(caps, hits),
        "instructions": redact_long(_text(res.get("instructions")), hits),
        "server_sha256": digest(definition("server", res)),
    }
    if hits:
        out["redacted"] = sorted(set(hits))
    return out


def contract_event(
    method: str, params: Any, response: Mapping[str, Any]
) -> tuple[str, dict[str, Any]] | None:
    """The record (kind, payload) of a contract request's response; None for an error (the
    server said nothing about itself)."""
    if "result" not in response:
        return None
    if method == "initialize":
        return "mcp-initialize", initialize_payload(params, response["result"])
    cursor = params.get("cursor") if isinstance(params, dict) else None
    return LISTED[method][0], list_payload(method, response["result"], cursor)
