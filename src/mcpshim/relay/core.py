"""The stdio MCP relay of `mcpshim run --mcp`: bytes through unchanged, a copy parsed aside.

Whatever moves the bytes (pump threads in relay.threaded, a pump child in relay.child, the
gate's threads in relay.gate), it passes each chunk on whole, before anything looks at it,
so the relay neither reorders, alters nor holds back a byte, and hands a copy (with the
time it arrived) to a recorder. Here: the Transcriber cuts the copies into newline-delimited
JSON-RPC messages and the Recorder records the calls that can start processes
(`tools/call`, `resources/read`, `prompts/get`) and their responses in the exec log, each
response with its size and the SHA-256 of the line that carried it (never its content),
and what the server says about itself: the `initialize` exchange and every `tools/list`,
`resources/list` and `prompts/list` result (relay.listings). A message that does not parse
is noted, never dropped from the stream. Recording can fail (a full disk) without touching
the relay. What waits for a recorder that fell behind is bounded (COPY_LIMIT): copies past
it are dropped, and the drop is recorded where it happened (`mcp-unrecorded`).

Right after each recorded response the recorder calls a probe that lists the family's live
processes (pid, start ticks; see supervise.relayed): evidence that a process outlived its call.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any, Protocol

from mcpshim.relay.framer import MAX_MESSAGE, Dropped, Framer, Oversize, Split, dropped_reason
from mcpshim.relay.listings import LISTED, Sized, contract_events
from mcpshim.relay.recordable import loads as _loads
from mcpshim.relay.recordable import recordable
from mcpshim.relay.redact import redact_json
from mcpshim.relay.skeleton import STREAM_MIN, Skeleton, skeleton

__all__ = [
    "C2S",
    "COPY_LIMIT",
    "MAX_MESSAGE",
    "S2C",
    "TRACKED",
    "Dropped",
    "Framer",
    "Oversize",
    "Recorder",
    "Relaying",
    "Transcriber",
    "announce",
    "close_end",
    "dropped_reason",
    "iso",
    "log_notification",
    "relay_pipe",
]

C2S = "client->server"
S2C = "server->client"
#: method -> the params key that names what is called
TRACKED: Mapping[str, tuple[str, str]] = {
    "tools/call": ("tool", "name"),
    "resources/read": ("uri", "uri"),
    "prompts/get": ("prompt", "name"),
}
#: requests whose results say what the server is and offers (the contract an approval pins)
CONTRACT = frozenset({"initialize", *LISTED})
_READ = 1 << 20
#: copies waiting for a recorder that fell behind, at most; past it they are dropped (and
#: the drop recorded): 1.5 GB queued in 4 s before, with a server that kept writing
COPY_LIMIT = 64 << 20

Emit = Callable[[str, dict[str, Any]], None]
Probe = Callable[[], list[tuple[int, int | None]]]


def iso(t: float) -> str:
    """ISO 8601 UTC with microseconds (the time key of every mcp-* event)."""
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds")


def log_notification(text: str, level: str = "critical") -> bytes:
    """An MCP log notification (`notifications/message`) from mcpshim, as one line."""
    params = {"level": level, "logger": "mcpshim", "data": text}
    msg = {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
    return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


def announce(emit: Emit, session: str) -> None:
    """Mark a session as relayed before any of its processes run (attribution keys on it)."""
    emit("mcp-session", {"session": session, "time": iso(time.time()), "transport": "stdio"})


# ---- recording ---------------------------------------------------------------------------


def _id_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _scalar_id(value: Any) -> Any:
    return value if isinstance(value, (str, int, float)) or value is None else str(value)


class Recorder:
    """Turns whole messages into mcp-request / mcp-response / mcp-unparsed events."""

    def __init__(self, emit: Emit, session: str, probe: Probe | None = None) -> None:
        self._emit = emit
        self.session = session
        self._probe = probe
        self._pending: dict[tuple[str, str], tuple[str, float]] = {}
        self._params: dict[tuple[str, str], Any] = {}  # a contract request's params
        self.failures = 0
        self._lossy = ""  # the message being recorded was read with its bad bytes replaced
        self.counts: dict[str, int] = {
            "messages": 0, "requests": 0, "responses": 0, "unparsed": 0, "unrecorded": 0
        }  # fmt: skip

    def _event(self, kind: str, t: float, payload: dict[str, Any]) -> None:
        if self._lossy and kind != "mcp-unparsed":
            payload = {**payload, "lossy": self._lossy}
        try:
            self._emit(kind, {"session": self.session, "time": iso(t), **payload})
        except Exception as exc:  # recording must never stop the relay
            self.failures += 1
            if self.failures == 1:
                print(f"mcpshim: warning: cannot record {kind}: {exc}", file=sys.stderr)

    def unrecorded(
        self, direction: str, t: float, dropped: Dropped, reason: str, messages: int = -1
    ) -> None:
        """Copies not recorded; `messages`: how many messages lost a byte, when the
        caller knows better than `dropped` (a line an earlier loss cut is counted once)."""
        messages = dropped.messages if messages < 0 else messages
        self.counts["unrecorded"] += messages
        payload = {"direction": direction, "bytes": dropped.size, "messages": messages}
        self._event("mcp-unrecorded", t, {**payload, "reason": reason})

    def unparsed(
        self, direction: str, t: float, size: int, reason: str, sha256: str = "", cause: str = ""
    ) -> None:
        """A line not recorded as a message: its size and hash, and why. With `cause` (a
        word of relay.readable.CAUSES) it could not be read completely, so what it said
        is unknown (review: MCS505); without, it was JSON but no JSON-RPC message."""
        self.counts["unparsed"] += 1
        payload: dict[str, Any] = {"direction": direction, "size": size, "reason": reason}
        if sha256:
            payload["sha256"] = sha256
        if cause:
            payload["unreadable"] = cause
        self._event("mcp-unparsed", t, payload)

    def message(self, direction: str, t: float, line: bytes, mark: int = -1) -> None:
        """One whole message, read at `t`; `mark`: the pid counter when it was passed on."""
        if not line.strip():
            return
        self.counts["messages"] += 1
        if direction == S2C and len(line) >= STREAM_MIN and (sk := skeleton(line)) is not None:
            # a large answer read by its skeleton: its lists' items one at a time
            self._one(direction, t, recordable(sk.doc), len(line), line, mark, sk)
            return
        try:
            doc = _loads(line)
        except UnicodeDecodeError:
            self._unread(direction, t, line, "not UTF-8 text", "not-utf8")
            doc = _replaced(line)
            if doc is None:
                return
            # what a peer that replaces the bad bytes reads (the SDKs do): recorded as
            # such, so a call answered so is answered in review, not "no answer"
            self._lossy = "not-utf8"
        except ValueError as exc:
            deep = str(exc) == "nested too deeply to parse"
            self._unread(direction, t, line, f"not JSON: {exc}", "too-deep" if deep else "not-json")
            return
        items = doc if isinstance(doc, list) else [doc]
        if not items:
            self._unread(direction, t, line, "empty batch", "not-json-rpc")
        try:
            for item in items:
                if not isinstance(item, dict):
                    self._unread(direction, t, line, "not a JSON-RPC object", "not-json-rpc")
                    continue
                self._one(direction, t, item, len(line), line, mark)
        finally:
            self._lossy = ""

    def _unread(self, direction: str, t: float, line: bytes, reason: str, cause: str) -> None:
        self.unparsed(direction, t, len(line), reason, hashlib.sha256(line).hexdigest(), cause)

    def _one(
        self,
        direction: str,
        t: float,
        msg: dict[str, Any],
        size: int,
        line: bytes,
        mark: int,
        sk: Skeleton | None = None,
    ) -> None:
        method = msg.get("method")
        if isinstance(method, str):
            if method in TRACKED and "id" in msg:
                self._request(direction, t, msg, method, size, mark)
            elif method in CONTRACT and "id" in msg:
                key = (direction, _id_key(msg["id"]))
                self._pending[key] = (method, t)
                self._params[key] = msg.get("params")
            return
        if "id" not in msg or not ("result" in msg or "error" in msg):
            self.unparsed(direction, t, size, "neither a request, a notification nor a response")
            return
        other = S2C if direction == C2S else C2S
        hit = self._pending.pop((other, _id_key(msg["id"])), None)
        if hit is None:
            return  # a response to something not tracked (initialize, tools/list...)
        method, _t0 = hit
        sha = hashlib.sha256(line).hexdigest()
        if method in CONTRACT:
            self._contract(direction, t, msg, method, size, sha, sk)
            return
        result = msg.get("result")
        error = msg.get("error")
        is_error = error is not None or (isinstance(result, dict) and result.get("isError") is True)
        code = error.get("code") if isinstance(error, dict) else None
        payload: dict[str, Any] = {
            "direction": direction,
            "id": _scalar_id(msg["id"]),
            "method": method,
            "is_error": is_error,
            "error_code": code if isinstance(code, int) else None,
            "size": size,
            "sha256": sha,
        }
        if mark >= 0:
            payload["last_pid"] = mark  # every fork the call caused has a pid up to here
        if self._probe is not None:
            with contextlib.suppress(Exception):
                payload["alive"] = [[p, s] for p, s in self._probe()]
                payload["alive_time"] = iso(time.time())
        self.counts["responses"] += 1
        self._event("mcp-response", t, payload)

    def _contract(
        self,
        direction: str,
        t: float,
        msg: dict[str, Any],
        method: str,
        size: int,
        sha: str,
        sk: Skeleton | None,
    ) -> None:
        other = S2C if direction == C2S else C2S
        params = self._params.pop((other, _id_key(msg["id"])), None)
        items = None
        if sk is not None and method in LISTED:
            items = _recordable_items(sk, LISTED[method][1])
        for kind, got in contract_events(method, params, msg, items):
            payload = {**got, "direction": direction, "id": _scalar_id(msg["id"])}
            self._event(kind, t, {**payload, "size": size, "sha256": sha})

    def _request(
        self, direction: str, t: float, msg: dict[str, Any], method: str, size: int, mark: int
    ) -> None:
        label, key = TRACKED[method]
        params = msg.get("params")
        params = params if isinstance(params, dict) else {}
        hits: list[str] = []
        name = params.get(key)
        payload: dict[str, Any] = {
            "direction": direction,
            "id": _scalar_id(msg["id"]),
            "method": method,
            label: redact_json(name, hits) if isinstance(name, str) else None,
            "size": size,
        }
        if method != "resources/read":
            payload["arguments"] = redact_json(params.get("arguments"), hits)
        if hits:
            payload["redacted"] = sorted(set(hits))
        if mark >= 0:
            payload["last_pid"] = mark  # every fork the call causes has a later pid
        self._pending[(direction, _id_key(msg["id"]))] = (method, t)
        self.counts["requests"] += 1
        self._event("mcp-request", t, payload)


#: a loss's entry as the Transcriber replays it: direction, time, a line kept or the bytes
#: dropped there, pid mark
Kept = tuple[str, float, "bytes | Dropped", int]


def _recordable_items(sk: Skeleton, key: str) -> Iterator[Sized]:
    """A listing's items from its skeleton, each made recordable as the whole message
    would have been (an item is the fourth level: message, result, list, item)."""
    for item, length in sk.items(key):
        yield recordable(item, 4), length


def _replaced(line: bytes) -> Any:
    """A line that is not UTF-8 as a peer that replaces its bad bytes reads it (U+FFFD),
    made recordable; None when that is no JSON either."""
    try:
        return recordable(json.loads(line.decode("utf-8", "replace")))
    except (ValueError, RecursionError):
        return None


def _parses(data: bytes) -> bool:
    try:
        _loads(data)
    except ValueError:
        return False
    return True


class Transcriber:
    """Chunks of both directions in, whole messages out to a Recorder: the one place that
    turns relayed bytes into records, whichever thread or process reads the copies."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        # the client's lines as the Python SDK's server cuts them (relay.framer)
        self._framers = {C2S: Framer(universal=True), S2C: Framer()}
        self._ended: set[str] = set()

    @property
    def done(self) -> bool:
        return len(self._ended) == len(self._framers)

    def dropped(self, direction: str, t: float, dropped: Dropped, reason: str) -> None:
        """Copies of `direction` were dropped at this point (the first at time `t`)."""
        self.lost(t, {direction: dropped}, [(direction, t, dropped, -1)], reason)

    def lost(
        self, t: float, totals: Mapping[str, Dropped], entries: list[Kept], reason: str
    ) -> None:
        """A loss mark (relay.loss), first at time `t`: what each direction lost in all is
        recorded there, then its entries are replayed in order: a line kept is fed as it
        came (its time and pid mark), a run of bytes dropped cuts the line it was in. A
        message is counted once, however many losses cut it."""
        cut = {d: f.skipping for d, f in self._framers.items()}  # counted by an earlier loss
        lines = dict.fromkeys(self._framers, 0)
        for direction, _when, data, _mark in entries:
            if not isinstance(data, Dropped):
                cut[direction] = cut[direction] and b"\n" not in data
            elif data.size:
                # the line it began in, unless counted; the lines whole inside it; the line
                # it ends in (when a newline came before its end and none ends it)
                lines[direction] += 0 if cut[direction] else 1
                if data.newlines:
                    lines[direction] += data.newlines - 1 + (0 if data.clean else 1)
                cut[direction] = not data.clean
        for direction, dropped in totals.items():
            if dropped.size:
                self.recorder.unrecorded(direction, t, dropped, reason, lines.get(direction, 0))
        for direction, when, data, mark in entries:
            if isinstance(data, Dropped):
                self._framers[direction].gap(data)
            elif data:
                self.feed(direction, when, data, mark)

    def feed(self, direction: str, t: float, data: bytes | None, mark: int = -1) -> None:
        """One chunk read at time `t` (the pid counter `mark` as it was passed on); None:
        the direction ended. A message takes the mark of the chunk that completes it."""
        rec, framer = self.recorder, self._framers[direction]
        if data is None:
            self._ended.add(direction)
            rest = framer.rest()
            if framer.pending():
                # A peer may end with a message and no newline; a line reader takes it.
                if rest is not None and _parses(rest):
                    rec.message(direction, t, rest, mark)
                else:
                    rec.unparsed(direction, t, framer.pending(), "incomplete message at end",
                                 framer.rest_sha256(), "incomplete")  # fmt: skip
            if (split := framer.split_at_end()) is not None:
                self._split(direction, t, split)
            return
        for line in framer.feed(data):
            try:
                if isinstance(line, Split):
                    self._split(direction, t, line)
                elif isinstance(line, Oversize):
                    rec.unparsed(direction, t, line.size, "message too large to parse",
                                 line.sha256, "too-large")  # fmt: skip
                else:
                    rec.message(direction, t, line, mark)
            except Exception as exc:  # never let one message stop the recorder
                rec.unparsed(direction, t, 0, f"recorder error: {type(exc).__name__}")

    def _split(self, direction: str, t: float, split: Split) -> None:
        """A line a bare \\r cut: recorded message by message as the Python SDK's server
        reads it (above), and said as a whole, since a server that ends lines at \\n only
        reads one message (or none) where that one reads several."""
        self.recorder.unparsed(
            direction, t, split.size,
            f"a bare carriage return cuts this line into {split.pieces} lines: the Python "
            "SDK's server reads each apart (recorded so), a server that ends lines at a "
            "newline only reads them as one",
            split.sha256, "line-ends",
        )  # fmt: skip


# ---- the relay ---------------------------------------------------------------------------


def relay_pipe() -> tuple[int, int]:
    """A pipe of the relay's, of the default size (64 KiB).

    Every pipe page counts against the user's pipe-user-pages-soft (64 MiB by default), past
    which the kernel gives each new pipe of that user, in any program, two pages: the relay
    child grows its pipes only in a session that carries large messages (relay.child).
    """
    return os.pipe()


def close_end(fd: int) -> None:
    """Close our end; a standard stream becomes /dev/null so its number is never reused."""
    with contextlib.suppress(OSError):
        if fd <= 2:
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, fd)
            os.close(null)
        else:
            os.close(fd)


class Relaying(Protocol):
    """What a session needs of a relay, in threads (relay.threaded.Relay) or in children
    (relay.forked.ForkedRelay)."""

    def start(self, client_in: int, server_in: int, server_out: int, client_out: int) -> None:
        """Pump client_in -> server_in and server_out -> client_out, recording a copy."""

    def server_done(self, timeout: float) -> bool:
        """Wait for the server's output to end; True when it did within `timeout`."""

    def finish(self, timeout: float = ...) -> None:
        """Record everything relayed so far."""

    def say(self, line: bytes) -> None:
        """Write a whole line of mcpshim's own to the client, between two of the server's
        lines (never inside one): now if the server's output is at a line's end, else once
        its line is done, or at its end (after a newline that ends what was cut short)."""
