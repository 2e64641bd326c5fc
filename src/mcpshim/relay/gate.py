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

Fail closed. A message the gate cannot read completely (relay.readable: past the 64 MiB
limit, nested too deep, not UTF-8, not JSON, not a JSON-RPC object or batch of them, or a
client's line a bare `\r` cuts into lines the Python SDK's server reads apart) is
never passed on as if approved: a client's is refused, each id it carries answered with
an error; a server's line that may answer an awaited listing is withheld the same way, and
every tool's definition is then unverified (each call refused until a listing is read).
One with no id to answer ends the session (both ways closed, `mcp-refused` with `ended`).
A server's line that is not JSON at all, or that answers no awaited listing, goes on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import orjson

from mcpshim.base import fdio
from mcpshim.contract.canon import definition_hash, order_hash, short
from mcpshim.contract.lockfile import Lock, ServerApproval, select_server
from mcpshim.relay.core import (
    C2S,
    S2C,
    Recorder,
    close_end,
    iso,
)
from mcpshim.relay.pidmark import PidMark
from mcpshim.relay.readable import Lines, Unreadable, early_id, read, read_request
from mcpshim.relay.skeleton import STREAM_MIN, skeleton
from mcpshim.relay.threaded import Relay

__all__ = ["REFUSED_CODE", "Gate", "GatedRelay", "Lines"]

REFUSED_CODE = -32001
_READ = 1 << 20
#: causes no peer reads past either (a syntax error): a server's such line goes on
_NOBODY = frozenset({"not-json"})
Emit = Callable[[str, dict[str, Any]], None]


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

    def awaited(self) -> set[str]:
        """The ids (as keys) of the listings asked for and not answered yet."""
        with self._mutex:
            return set(self._pending)

    def settle(self, ids: Sequence[Any]) -> None:
        """These requests were answered by the relay (an error): no longer awaited."""
        with self._mutex:
            for i in ids:
                self._pending.pop(_key(i), None)

    def unverified(self) -> None:
        """A listing could not be read: no tool's definition is known any more, so every
        call is refused until a listing is read again."""
        with self._mutex:
            self.listed = {}

    def refuse(self, msg_id: Any, reason: str, extra: dict[str, Any], ended: bool = False) -> None:
        """Record a message refused (or the session ended) for being unreadable."""
        self.refused += 1
        self._emit("mcp-refused", {
            "session": self.session, "time": iso(time.time()), "id": msg_id, "tool": None,
            "reason": reason, "lock": self.lock_path, "ended": ended,
            "server": self.server.name if self.server else None, **extra,
        })  # fmt: skip

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

    def response(self, msg: dict[str, Any], items: Iterable[Any] | None = None) -> None:
        """A server's message while a listing is awaited; `items`: a large listing's
        items one at a time (relay.skeleton), its result's own list left empty."""
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
        if items is None:
            tools = result.get("tools")
            items = tools if isinstance(tools, list) else []
        page: dict[str, str] = {}
        orders: dict[str, str] = {}
        for t in items:
            if isinstance(t, dict) and isinstance(t.get("name"), str):
                page[t["name"]] = definition_hash("tool", t)
                orders[t["name"]] = order_hash("tool", t)
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


class GatedRelay(Relay):
    """A relay (relay.core.Relaying) that decides each line before passing it on."""

    def __init__(self, recorder: Recorder, gate: Gate) -> None:
        super().__init__(recorder)
        self.gate = gate
        self._out = threading.Lock()  # the client's stdout: whole lines, one writer at a time
        self._client_out = self._server_in = -1
        self._marks = PidMark()
        self._over: dict[str, str] = {}  # direction -> inside an overlong line: pass | drop
        self._ending = ""  # a message that ends the session was read: end once it is handled
        self.ended = ""  # why the gate ended the session (a message it could not read)

    def start(self, client_in: int, server_in: int, server_out: int, client_out: int) -> None:
        self._client_out, self._server_in = client_out, server_in
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

    def say(self, line: bytes) -> None:
        """A line of mcpshim's own to the client: between whole lines (self._out)."""
        with self._out:
            if S2C not in self.broken:
                with contextlib.suppress(OSError):
                    fdio.write_all(self._client_out, line)

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
                    self._responses(dst, lines.feed(data))
        rest = lines.rest()
        if rest and not self.ended:  # a last line without its newline, as a peer may end
            if direction == S2C:
                with self._out:
                    self._responses(dst, iter([(rest, True)]))
            else:
                self._requests(dst, iter([(rest, True)]))
        close_end(src)
        if direction not in self.broken:
            close_end(dst)
        self._copy(direction, time.time(), None)

    def _requests(self, dst: int, pieces: Iterator[tuple[bytes, bool]]) -> None:
        """Pass the client's lines on, less the refused ones, which are answered here (in
        order: what came before a refused line goes on first)."""
        held: list[bytes] = []
        for piece, whole in pieces:
            if self.ended:
                return
            answer, forward = self._decide(piece) if whole else self._overlong(C2S, piece)
            if answer is None:
                held.append(piece)
                continue
            self._send(dst, C2S, b"".join(held))
            held.clear()
            self._send(dst, C2S, forward, copy=piece)  # the copy: what the client sent
            if answer:
                with self._out:
                    self._send(self._client_out, S2C, answer)
            if self._ending:
                self._end()
                return
        self._send(dst, C2S, b"".join(held))

    def _responses(self, dst: int, pieces: Iterator[tuple[bytes, bool]]) -> None:
        """The server's lines, read only while a listing is awaited (under self._out); the
        copy is what the server sent, whatever goes on in its place."""
        fwd: list[bytes] = []
        copy: list[bytes] = []
        for piece, whole in pieces:
            if whole:
                go = self._answer(piece)
            else:
                answer, forward = self._overlong(S2C, piece)
                go = forward if answer is None else answer + forward
            fwd.append(go)
            copy.append(piece)
            if self._ending:
                break
        self._send(dst, S2C, b"".join(fwd), copy=b"".join(copy))
        if self._ending:
            self._end()

    def _decide(self, line: bytes) -> tuple[bytes | None, bytes]:
        """(the relay's own answer or None, what goes on to the server) for a whole line."""
        if not line.strip():
            return None, line
        doc = read_request(line)  # framed as every server reads it (relay.readable)
        if isinstance(doc, Unreadable):
            return self._unreadable(C2S, doc, len(line), hashlib.sha256(line).hexdigest())
        items = doc if isinstance(doc, list) else [doc]
        errors, kept = [], []
        for item in items:
            err = self.gate.request(item)
            if err is None:
                kept.append(item)
            else:
                errors.append({"jsonrpc": "2.0", "id": item.get("id"), "error": err})
        if not errors:
            return None, line
        answer = orjson.dumps(errors if isinstance(doc, list) else errors[0]) + b"\n"
        # (json, not orjson: it writes back what it read, NaN and 70-bit integers included)
        return answer, (json.dumps(kept, separators=(",", ":")).encode() + b"\n" if kept else b"")

    def _answer(self, line: bytes) -> bytes:
        """A whole line of the server's: while a listing is awaited, read it first."""
        if not self.gate.waiting or not line.strip():
            return line
        if len(line) >= STREAM_MIN and (sk := skeleton(line)) is not None:
            # a large listing read by its skeleton: its tools one at a time
            self.gate.response(sk.doc, (t for t, _n in sk.items("tools")))
            return line
        doc = read(line)
        if isinstance(doc, Unreadable):
            if doc.cause in _NOBODY and not (set(map(_key, doc.ids)) & self.gate.awaited()):
                return line  # no client reads a listing from it either: on its way
            answer, _ = self._unreadable(S2C, doc, len(line), hashlib.sha256(line).hexdigest())
            return answer or b""
        for item in doc if isinstance(doc, list) else [doc]:
            self.gate.response(item)
        return line

    def _overlong(self, direction: str, piece: bytes) -> tuple[bytes | None, bytes]:
        """A piece of a line past the limit: at its head, decide whether it may go on
        (a server's line no listing awaits) or is refused by its id (or ends the session);
        (an answer of the relay's own or None, what goes on)."""
        state = self._over.get(direction)
        if state is None:
            ids = early_id(piece)
            passing = direction == S2C and (
                not self.gate.waiting or bool(ids and not set(map(_key, ids)) & self.gate.awaited())
            )
            if passing:
                state = "pass"
                answer = None
            else:
                state, (answer, _) = (
                    "drop",
                    self._unreadable(direction, Unreadable("too-large", ids), len(piece), ""),
                )
            self._over[direction] = state
        else:
            answer = b"" if state == "drop" else None
        if piece.endswith(b"\n"):
            del self._over[direction]
        if state == "pass":
            return None, piece
        return (answer or b""), b""

    def _unreadable(
        self, direction: str, msg: Unreadable, size: int, sha: str
    ) -> tuple[bytes | None, bytes]:
        """A message the gate cannot read: refused by its ids, each answered with an error
        (a listing awaited is then unverified: no call passes on the old one), or, with
        no id to answer, the session ends. Nothing of it goes on."""
        what = "message" if direction == C2S else "answer"
        text = f"mcpshim: the client's {what} refused: the gate cannot read it ({msg.why})"
        if direction == S2C:
            text = f"mcpshim: the server's {what} withheld: the gate cannot read it ({msg.why})"
            awaited = self.gate.awaited()
            ids = tuple(i for i in msg.ids if _key(i) in awaited)
            if ids:
                self.gate.unverified()
        else:
            ids = msg.ids
        payload = {"direction": direction, "unreadable": msg.cause, "size": size}
        if sha:
            payload["sha256"] = sha
        if not ids:
            self.gate.refuse(None, text + "; no id to answer, so the session ends", payload,
                             ended=True)  # fmt: skip
            self._ending = text
            return b"", b""
        errors = []
        for i in ids:
            self.gate.refuse(i, text, payload)
            errors.append({"jsonrpc": "2.0", "id": i, "error": {"code": REFUSED_CODE,
                                                                "message": text}})  # fmt: skip
        self.gate.settle(ids)
        return orjson.dumps(errors if len(errors) > 1 else errors[0]) + b"\n", b""

    def _end(self) -> None:
        """Stop relaying: the server's stdin and the client's stdout closed, both ways."""
        if self.ended:
            return
        self.ended = self._ending
        print(f"{self.ended}; no id to answer: the session ends (--enforce)", file=sys.stderr)
        for direction, fd in ((C2S, self._server_in), (S2C, self._client_out)):
            if direction not in self.broken:
                self.broken[direction] = "ended by the gate"
                close_end(fd)
