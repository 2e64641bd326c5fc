"""The seal record: one more record kind in the log, written by the sealer.

    \\0R \\0=1 \\0=seal \\0={"end":..,"key":..,"mac":..,"n":..,...} \\0\\n

A seal covers bytes [start, end) of one segment: their SHA-256, and a digest of the spill
files the pointers among them name (a spill file is part of its record). It names the
previous seal by the SHA-256 of that seal's whole record (its head), so the seals form one
chain across segments; `n` is its place in the chain, `segment` the number the sealer gave
the file it covers. `mac` is an HMAC of every other field under the key of sealing session
`sealer` of epoch `epoch` of the key `key` names, whose epoch 0 began at `origin` and
which moves on every `period` seconds (see keys); `time` falls in that epoch. A seal never
covers itself: the next range starts where this one ended, so it covers this seal record
and what shims appended meanwhile.

`boots` (only when there are any) seals the boot anchors beside the log, which date every
exec record of their boot: `[boot id, the anchor file's text, the sealer's own clock
reading of that boot's start (its own boot only, else "")]` for each anchor new or changed
since the sealer last sealed it, and all of them in a segment's first seal. The MAC covers
them too.
"""

from __future__ import annotations

import calendar
import contextlib
import functools
import hashlib
import json
import mmap
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from mcpshim.base.fdio import open_regular
from mcpshim.errors import InputError
from mcpshim.log.events import event_data
from mcpshim.log.execlog import encode_record

__all__ = [
    "KIND",
    "MARKER",
    "Buffer",
    "Seal",
    "find_seals",
    "head_of",
    "mapped",
    "parse_stamp",
    "sha256_of",
    "spill_digest",
    "utc_stamp",
]

KIND = "seal"
MARKER = b"\0R\0=1\0=" + KIND.encode() + b"\0="
_END = b"\0\n"
_POINTER = b"\0P\0=1\0="
_FIELDS = (
    "n",
    "key",
    "origin",
    "period",
    "epoch",
    "sealer",
    "segment",
    "start",
    "end",
    "sha256",
    "spills",
    "prev",
)
_INTS = ("n", "origin", "period", "epoch", "sealer", "segment", "start", "end")


class Buffer(Protocol):
    """bytes or an mmap: what the scanners need of the log's bytes."""

    def find(self, sub: bytes, start: int = ..., end: int = ...) -> int: ...
    def rfind(self, sub: bytes, start: int = ..., end: int = ...) -> int: ...
    def __getitem__(self, key: slice) -> bytes: ...
    def __len__(self) -> int: ...


@dataclass(frozen=True)
class Seal:
    n: int
    key: str
    origin: int
    period: int
    epoch: int
    sealer: int  # the sealing session within the epoch (see keys)
    segment: int
    start: int
    end: int
    sha256: str
    spills: str
    prev: str
    time: str
    mac: str = ""
    boots: tuple[tuple[str, str, str], ...] = ()  # (boot id, anchor, clock), by boot id

    def message(self) -> bytes:
        """What the MAC covers: every field but the MAC, in a fixed order (the boots, when
        there are any, last: a seal without them is signed as before they were sealed)."""
        parts = [str(getattr(self, f)) for f in (*_FIELDS, "time")]
        if self.boots:
            parts.append(
                "boots=" + json.dumps([list(b) for b in self.boots], separators=(",", ":"))
            )
        return b"mcpshim-seal/1\0" + "\0".join(parts).encode()

    def encode(self) -> bytes:
        doc = asdict(self)
        if not self.boots:
            del doc["boots"]
        body = json.dumps(doc, separators=(",", ":"), sort_keys=True)
        return encode_record(KIND, [body.encode()])

    @classmethod
    def parse(cls, body: bytes) -> Seal:
        """From the JSON field; ValueError when it is not a well-formed seal. The JSON is
        checked as the reader checks any event record's (one object, no NaN, no lone
        surrogate, not nested deeper than any writer nests)."""
        data = event_data(body)
        boots = data.pop("boots", None)
        if set(data) != {*_FIELDS, "time", "mac"}:
            raise ValueError("not a seal (fields missing or extra)")
        if any(type(data[k]) is not int or data[k] < 0 for k in _INTS):
            raise ValueError("not a seal (a number is not a non-negative integer)")
        if any(not isinstance(data[k], str) for k in data if k not in _INTS):
            raise ValueError("not a seal (a text field is not a string)")
        if boots is not None:
            data["boots"] = _boots(boots)
        seal = cls(**data)
        if seal.end < seal.start or seal.period < 1 or not seal.ms:
            raise ValueError("not a seal (bad range, period or time)")
        return seal

    @functools.cached_property
    def ms(self) -> int:
        """Its time in UTC milliseconds."""
        return parse_stamp(self.time) or 0

    def epoch_of_time(self) -> int:
        """The epoch its own time falls in, by its own origin and period."""
        return (self.ms // 1000 - self.origin) // self.period


def _boots(value: object) -> tuple[tuple[str, str, str], ...]:
    """A seal's `boots`: a non-empty list of [boot id, anchor, clock] strings."""
    if not isinstance(value, list) or not value:
        raise ValueError("not a seal (boots is not a list of anchors)")
    out = []
    for item in value:
        if not (
            isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item)
        ):
            raise ValueError("not a seal (a boot anchor is not [boot, anchor, clock])")
        out.append((item[0], item[1], item[2]))
    return tuple(out)


def head_of(record: bytes) -> str:
    """A seal's head: the SHA-256 of its whole record, as the log holds it."""
    return hashlib.sha256(record).hexdigest()


def utc_stamp(ms: int) -> str:
    """UTC milliseconds as ISO 8601 (what a seal's `time` holds, exactly)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z", re.ASCII)


def parse_stamp(text: str) -> int | None:
    """UTC milliseconds from what `utc_stamp` writes; None for anything else."""
    m = _STAMP.fullmatch(text)
    if m is None:
        return None
    y, mo, d, h, mi, sec, ms = (int(p) for p in m.groups())
    if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and sec < 61):
        return None
    return calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0)) * 1000 + ms


def find_seals(buf: Buffer, start: int, end: int) -> Iterator[tuple[int, int, Seal | None, str]]:
    """(offset, end of record, seal or None, why not) for each seal record in buf[start:end].

    A mapped log is searched 16 MiB at a time and the pages searched are given back (a
    read-only file mapping: they are page cache, counted in RSS until dropped; read again,
    they fault back in), so a header's search of an unsealed log stays small."""
    pos = start
    while True:
        p = _find_marker(buf, pos, end)
        if p < 0:
            return
        e = buf.find(_END, p, end)
        if e < 0:
            yield p, end, None, "seal record cut short"
            return
        body = buf[p + len(MARKER) : e]
        try:
            if b"\0" in body:
                raise ValueError("seal record with more than one field")
            yield p, e + 2, Seal.parse(body), ""
        except (ValueError, UnicodeDecodeError, TypeError) as exc:
            yield p, e + 2, None, str(exc)
        pos = e + 2


_STEP = 16 << 20


def _find_marker(buf: Buffer, pos: int, end: int) -> int:
    if not isinstance(buf, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return buf.find(MARKER, pos, end)
    while True:
        stop = min(pos + _STEP + len(MARKER), end)
        p = buf.find(MARKER, pos, stop)
        page = pos - pos % mmap.PAGESIZE
        upto = (p if p >= 0 else stop) - page
        upto -= upto % mmap.PAGESIZE
        if upto > 0:
            with contextlib.suppress(OSError):
                buf.madvise(mmap.MADV_DONTNEED, page, upto)
        if p >= 0 or stop >= end:
            return p
        pos = stop - len(MARKER)


def spill_digest(buf: Buffer, start: int, end: int, spill_dir: Path) -> str:
    """Digest of the spill files named by pointers in buf[start:end] ("" when none): a seal
    covers a spilled record's bytes, not only the pointer to them."""
    h = None
    pos = start
    while (p := buf.find(_POINTER, pos, end)) >= 0:
        e = buf.find(_END, p, end)
        if e < 0:
            break
        name = bytes(buf[p + len(_POINTER) : e])
        h = h or hashlib.sha256()
        h.update(name + b"\0" + _file_hash(spill_dir, name) + b"\n")
        pos = e + 2
    return h.hexdigest() if h else ""


def _file_hash(spill_dir: Path, name: bytes) -> bytes:
    text = name.decode("ascii", "replace")
    if "/" in text or text.startswith(".") or b"\0" in name:
        return b"bad-name"
    try:
        with open_regular(spill_dir / text) as fh:
            return hashlib.sha256(fh.read()).hexdigest().encode()
    except (OSError, InputError):
        return b"missing"


@contextlib.contextmanager
def mapped(fd: int, size: int) -> Iterator[Buffer]:
    """The file's first `size` bytes, mapped read-only (mmap refuses an empty file)."""
    if size == 0:
        yield b""
        return
    with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mm:
        yield mm


def sha256_of(buf: Buffer, start: int, end: int) -> str:
    """SHA-256 of buf[start:end] without copying a mapped file's bytes."""
    if isinstance(buf, bytes):
        return hashlib.sha256(buf[start:end]).hexdigest()
    assert isinstance(buf, mmap.mmap)
    view = memoryview(buf)
    try:
        return hashlib.sha256(view[start:end]).hexdigest()
    finally:
        view.release()
