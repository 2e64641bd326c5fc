"""`run --mcp --lock L --enforce`: the relay answers a call to a drifted tool itself.

Enforcement needs the relay to read a request before the server does, which the forwarding
relays never do (they pass bytes on first and parse a copy later). So under --enforce the
relay is this one: two threads that cut each direction into whole lines and pass each line
on once it is decided. Client to server, every line is parsed; a `tools/call` to a tool
the lock does not approve as listed is not forwarded: the client gets a JSON-RPC error
(code -32001) in its place, and the refusal is recorded (`mcp-refused`) with the hashes
that decided it. Server to client, a line is parsed only while an `initialize` or
`tools/list` is unanswered: the verdicts are updated from the tool list before the client
sees it, so no call can race ahead of them. Every line written to the client is whole, so
an answer of the relay's own never lands inside one of the server's.

A call is allowed only to a tool this session listed with the definition the lock
approved: its definition hash, or its order hash (the same words and list items in another
order, as a server that lists a Python set writes them at each start: contract.canon).
Refused: a tool whose definition changed otherwise, a tool the lock does not know, a tool
not listed in this session (its definition is unverified), and every tool of a server the
lock has no entry for. The cost of parsing on the forwarding path is in
docs/performance.md; without --enforce nothing is parsed before it is passed on.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson

from mcpshim.base import fdio
from mcpshim.contract.canon import definition_hash, order_hash, short
from mcpshim.contract.lockfile import Lock, ServerApproval, select_server
from mcpshim.relay.core import (
    C2S,
    MAX_MESSAGE,
    S2C,
    Recorder,
    close_end,
    iso,
)
from mcpshim.relay.pidmark import PidMark
from mcpshim.relay.threaded import Relay

__all__ = ["REFUSED_CODE", "Gate", "GatedRelay", "Lines"]

REFUSED_CODE = -32001
_READ = 1 << 20
Emit = Callable[[str, dict[str, Any]], None]


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class Gate:
    """The verdicts: which tools this session listed, with what hash, against the lock."""

    def __init__(
        self, lock: Lock, lock_path: str, run_name: str, command: Sequence[str], emit: Emit,
        session: str,
    ) -> None:  # fmt: skip
        self.lock, self.lock_path = lock, lock_path
        self.run_name, self.command = run_name, tuple(command)
        self.server: ServerApproval | None = select_server(lock, run_name, command)
        self._emit, self.session = emit, session
        self.listed: dict[str, str] = {}  # tool -> definition hash, as last listed
        self.orders: dict[str, str] = {}  # tool -> its order hash, as last listed
        self._pending: dict[str, tuple[str, Any]] = {}  # request id -> (method, cursor)
        self._mutex = threading.Lock()
        self.refused = 0

    @property
    def waiting(self) -> bool:
        return bool(self._pending)

    def request(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """Note a request; the error to answer a refused tools/call with, or None."""
        method, params = msg.get("method"), msg.get("params")
        params = params if isinstance(params, dict) else {}
        if method in ("initialize", "tools/list") and "id" in msg:
            with self._mutex:
                self._pending[_key(msg["id"])] = (str(method), params.get("cursor"))
            return None
        if method != "tools/call" or "id" not in msg:
            return None
        tool = params.get("name")
        reason, approved, now = self.verdict(tool if isinstance(tool, str) else "")
        if reason is None:
            return None
        self.refused += 1
        self._emit("mcp-refused", {
            "session": self.session, "time": iso(time.time()), "id": msg["id"],
            "tool": str(tool), "reason": reason, "approved_sha256": approved,
            "listed_sha256": now, "lock": self.lock_path,
            "server": self.server.name if self.server else None,
        })  # fmt: skip
        text = f"mcpshim: tool {tool!r} refused: {reason} (lock {self.lock_path})"
        data = {"tool": tool, "approved_sha256": approved, "listed_sha256": now}
        return {"code": REFUSED_CODE, "message": text, "data": data}

    def response(self, msg: dict[str, Any]) -> None:
        if "id" not in msg:
            return
        with self._mutex:
            hit = self._pending.pop(_key(msg["id"]), None)
        result = msg.get("result")
        if hit is None or not isinstance(result, dict):
            return
        method, cursor = hit
        if method == "initialize":
            info = result.get("serverInfo")
            name = info.get("name") if isinstance(info, dict) else None
            if self.server is None and isinstance(name, str):
                self.server = select_server(self.lock, self.run_name, self.command, name)
            return
        tools = result.get("tools")
        listed = [
            t
            for t in (tools if isinstance(tools, list) else [])
            if isinstance(t, dict) and isinstance(t.get("name"), str)
        ]
        page = {t["name"]: definition_hash("tool", t) for t in listed}
        orders = {t["name"]: order_hash("tool", t) for t in listed}
        with self._mutex:
            self.listed = {**self.listed, **page} if cursor is not None else page
            self.orders = {**self.orders, **orders} if cursor is not None else orders

    def verdict(self, tool: str) -> tuple[str | None, str, str]:
        """(why the call is refused, or None; the approved hash; the listed hash)."""
        now = self.listed.get(tool, "")
        if self.server is None:
            return "its server has no entry in the lock", "", now
        approved = self.server.tools.get(tool)
        if approved is None:
            return f"it is not approved for server {self.server.name}", "", now
        if not now:
            return (
                "it was not listed in this session, so its definition is unverified",
                (approved.sha256),
                now,
            )
        if now != approved.sha256 and not (
            approved.order_sha256 and self.orders.get(tool) == approved.order_sha256
        ):
            why = (
                f"its definition changed since it was approved ({short(approved.sha256)} "
                f"approved, {short(now)} listed)"
            )
            return why, approved.sha256, now
        return None, approved.sha256, now


class Lines:
    """Whole lines out of chunks; a line longer than MAX_MESSAGE is passed through in
    pieces, undecided (bounded memory), flagged False."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.through = False  # inside a line too long to hold

    def feed(self, chunk: bytes) -> Iterator[tuple[bytes, bool]]:
        """(bytes, whole): a whole line with its newline, or a piece of an overlong one."""
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                rest = chunk[start:]
                if self.through:
                    if rest:
                        yield rest, False
                elif rest:
                    self.parts.append(rest)
                    self.size += len(rest)
                    if self.size > MAX_MESSAGE:
                        yield b"".join(self.parts), False
                        self.parts, self.size, self.through = [], 0, True
                return
            piece = chunk[start : nl + 1]
            if self.through:
                yield piece, False
            elif self.parts:
                yield b"".join([*self.parts, piece]), True
            else:
                yield piece, True
            self.parts, self.size, self.through = [], 0, False
            start = nl + 1

    def rest(self) -> bytes:
        return b"".join(self.parts)


class GatedRelay(Relay):
    """A relay (relay.core.Relaying) that decides each line before passing it on."""

    def __init__(self, recorder: Recorder, gate: Gate) -> None:
        super().__init__(recorder)
        self.gate = gate
        self._out = threading.Lock()  # the client's stdout: whole lines, one writer at a time
        self._client_out = -1
        self._marks = PidMark()

    def start(self, client_in: int, server_in: int, server_out: int, client_out: int) -> None:
        self._client_out = client_out
        pumps = {C2S: (client_in, server_in), S2C: (server_out, client_out)}
        for direction, (src, dst) in pumps.items():
            self._threads[direction] = threading.Thread(
                target=self._pump,
                args=(src, dst, direction),
                name=f"mcp gate {direction}",
                daemon=True,
            )
        self._threads["recorder"] = threading.Thread(
            target=self._record, name="mcp recorder", daemon=True
        )
        for th in self._threads.values():
            th.start()

    def _send(self, fd: int, direction: str, data: bytes, copy: bytes | None = None) -> None:
        """Pass `data` on and queue its copy (`copy` when what the peer sent differs from
        what goes on); a reader that is gone is no error: the pump stops (_pump)."""
        copy = data if copy is None else copy
        if copy:  # the pid counter before the line goes on (see relay.pidmark)
            self._copy(direction, time.time(), copy, self._marks.read())
        self.bytes[direction] += len(data)
        if data and direction not in self.broken:
            try:
                fdio.write_all(fd, data)
            except OSError as exc:
                self.broken[direction] = exc.strerror or str(exc)
                close_end(fd)

    def _pump(self, src: int, dst: int, direction: str) -> None:
        lines = Lines()
        while direction not in self.broken:  # a reader gone is passed on, as relay.threaded
            try:
                data = fdio.read_some(src, _READ)
            except OSError:
                data = b""
            if not data:
                break
            if direction == C2S:
                self._requests(dst, lines.feed(data))
            else:
                with self._out:  # whole lines only: nothing of ours can land inside one
                    out = [self._answer(p) if whole else p for p, whole in lines.feed(data)]
                    self._send(dst, direction, b"".join(out))
        if direction == S2C:
            with self._out:
                self._send(dst, direction, lines.rest())
        else:
            self._send(dst, direction, lines.rest())
        close_end(src)
        if direction not in self.broken:
            close_end(dst)
        self._copy(direction, time.time(), None)

    def _requests(self, dst: int, pieces: Iterator[tuple[bytes, bool]]) -> None:
        """Pass the client's lines on, less the refused calls, which are answered here (in
        order: what came before a refused line goes on first)."""
        held: list[bytes] = []
        for piece, whole in pieces:
            answer, forward = self._decide(piece) if whole else (None, piece)
            if answer is None:
                held.append(piece)
                continue
            self._send(dst, C2S, b"".join(held))
            held.clear()
            self._send(dst, C2S, forward, copy=piece)  # the copy: what the client sent
            with self._out:
                self._send(self._client_out, S2C, answer)
        self._send(dst, C2S, b"".join(held))

    def _decide(self, line: bytes) -> tuple[bytes | None, bytes]:
        """(the relay's own answer or None, what goes on to the server) for a whole line."""
        try:
            doc = _loads(line)
        except ValueError:
            return None, line  # not JSON: the server's to answer
        items = doc if isinstance(doc, list) else [doc]
        errors, kept = [], []
        for item in items:
            err = self.gate.request(item) if isinstance(item, dict) else None
            if err is None:
                kept.append(item)
            else:
                errors.append({"jsonrpc": "2.0", "id": item.get("id"), "error": err})
        if not errors:
            return None, line
        answer = orjson.dumps(errors if isinstance(doc, list) else errors[0]) + b"\n"
        return answer, (orjson.dumps(kept) + b"\n" if kept else b"")

    def _answer(self, line: bytes) -> bytes:
        if self.gate.waiting:
            try:
                doc = _loads(line)
            except ValueError:
                return line
            for item in doc if isinstance(doc, list) else [doc]:
                if isinstance(item, dict):
                    self.gate.response(item)
        return line
