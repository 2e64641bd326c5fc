"""What a server says about itself, as the recorder files it: the `initialize` exchange and
each `tools/list`, `resources/list` and `prompts/list` result.

These are the contract an approval pins (contract.canon): each listed item is recorded by
name with the hash of its canonical definition, a tool also with its order hash (the same
items in any order hash alike: contract.canon) and its definition, its
texts redacted like any text the relay records (descriptions are cut at DESCRIPTION_MAX
rather than relay.redact's 2 KiB, so a change deep in a long description still shows in a
diff). The hash is of the definition as the server sent it, before redaction.

A listing is recorded in parts of at most PART_CHARS characters of items (the first part
holds no `part`, each later one `part: N`, readers merge them into the listing), so that
what the recorder holds is one part, whatever the listing's size; a large listing's items
come one at a time from its skeleton (relay.skeleton), never as a whole tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from mcpshim.contract.canon import definition, definition_hash, digest, order_hash
from mcpshim.log.redact import redact_text
from mcpshim.relay.redact import redact_json

__all__ = [
    "DESCRIPTION_MAX",
    "LISTED",
    "PART_CHARS",
    "contract_events",
    "initialize_payload",
    "list_payloads",
    "redact_long",
]

DESCRIPTION_MAX = 16 << 10
PART_CHARS = 256 << 10  # of a listing's items as sent, in one record at most
#: an item's length in characters as sent, and the item
Sized = tuple[Any, int]
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


def _sized(items: Any) -> Iterator[Sized]:
    """A parsed list's items, each with a length that bounds a part like the text's (a
    listing this size was parsed whole: it is small, but for its descriptions)."""
    for item in items if isinstance(items, list) else []:
        text = item.get("description") if isinstance(item, dict) else None
        yield item, 256 + (len(text) if isinstance(text, str) else 0)


def list_payloads(
    method: str, result: Any, cursor: Any, items: Iterable[Sized] | None = None
) -> Iterator[dict[str, Any]]:
    """The records of one page of a list result (`cursor`: the request's, None on page
    one), in parts; `items`: the page's items one at a time (a skeleton's), else the
    result's own."""
    _kind, key, what = LISTED[method]
    res = result if isinstance(result, dict) else {}
    nxt = res.get("nextCursor")
    head: dict[str, Any] = {
        "method": method,
        "cursor": cursor if isinstance(cursor, str) else None,
        "next_cursor": nxt if isinstance(nxt, str) else None,
    }
    part, size = 0, 0
    rows: list[dict[str, Any]] = []
    hits: list[str] = []
    for item, length in _sized(res.get(key)) if items is None else items:
        if rows and size + length > PART_CHARS:
            yield _part(head, key, rows, hits, part)
            part, size, rows, hits = part + 1, 0, [], []
        if isinstance(item, dict):
            rows.append(_tool(item, hits) if what == "tool" else _item(what, item, hits))
            size += length
    yield _part(head, key, rows, hits, part)


def _part(
    head: dict[str, Any], key: str, rows: list[dict[str, Any]], hits: list[str], part: int
) -> dict[str, Any]:
    out = {**head, key: rows}
    if part:
        out["part"] = part
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


def contract_events(
    method: str, params: Any, response: Mapping[str, Any], items: Iterable[Sized] | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The records (kind, payload) of a contract request's response; none for an error
    (the server said nothing about itself). `items`: a listing's, one at a time."""
    if "result" not in response:
        return
    if method == "initialize":
        yield "mcp-initialize", initialize_payload(params, response["result"])
        return
    cursor = params.get("cursor") if isinstance(params, dict) else None
    for payload in list_payloads(method, response["result"], cursor, items):
        yield LISTED[method][0], payload
