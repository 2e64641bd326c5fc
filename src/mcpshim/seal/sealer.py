"""Sealing: append seal records that cover what was appended since the last seal.

A sealing session holds the sealer lock (one sealer per log) and the current epoch's key.
Each round takes the log's lock (so no Python writer or rotation moves underneath), looks
at every segment, and for each one that grew appends one seal to that same file, covering
[sealed end, size): a rotated segment gets its last seal in itself, the new live log its
first. Shims keep appending without a lock meanwhile; what they add after the size was
read is covered by the next seal. The covered bytes are read through mmap, never whole
into memory.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from mcpshim.base import fdio
from mcpshim.errors import InputError
from mcpshim.log.boot import anchor_texts, current_boot_id, now_anchor, write_boot_anchor
from mcpshim.log.eventlog import log_lock
from mcpshim.log.execlog import segments
from mcpshim.paths import Locations
from mcpshim.seal import anchors, keys
from mcpshim.seal.record import (
    Buffer,
    Seal,
    find_seals,
    head_of,
    mapped,
    sha256_of,
    spill_digest,
    utc_stamp,
)
from mcpshim.seal.state import SealerLock, State, Tracked, load, save

__all__ = ["Sealer", "Written", "last_seal", "log_id", "segment_files"]

Say = Callable[[str], None]


@dataclass(frozen=True)
class Written:
    seal: Seal
    head: str
    file: str
    at: int  # offset of the seal record

    @property
    def where(self) -> str:
        return f"{self.file}@{self.at}"


@dataclass(frozen=True)
class SegmentFile:
    path: Path
    dev: int
    ino: int
    size: int


def segment_files(loc: Locations) -> list[SegmentFile]:
    out = []
    for p in segments(loc):
        with contextlib.suppress(FileNotFoundError):
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                out.append(SegmentFile(p, st.st_dev, st.st_ino, st.st_size))
    return out


def _create_live(loc: Locations) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    os.close(os.open(loc.log_file, flags, 0o600))


def last_seal(f: SegmentFile) -> tuple[Seal, int, int] | None:
    """The last well-formed seal in a segment: (seal, offset, end of its record)."""
    last = None
    fd = os.open(f.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        with mapped(fd, f.size) as data:
            for p, e, seal, _ in find_seals(data, 0, f.size):
                if seal is not None:
                    last = (seal, p, e)
    finally:
        os.close(fd)
    return last


def log_id(loc: Locations) -> str:
    return os.fsdecode(os.path.abspath(loc.log_dir))


class Sealer:
    """One sealing session over one log (see the module docstring)."""

    def __init__(self, loc: Locations, state_path: Path, say: Say) -> None:
        self.loc = loc
        self.path = state_path
        self.say = say
        self.lock = SealerLock(state_path)
        self.state: State | None = None
        self._boots: dict[str, str] = {}  # the boot anchors this round found
        self._keys: keys.SealKeys | None = None
        self.last: Written | None = None

    # -- the session --------------------------------------------------------------------

    def start(self, timeout: float = 0.0, state: State | None = None) -> bool:
        """Take the sealer lock and the key of the current epoch (False: another sealer
        holds the lock). The next epoch's key is on disk, fsync'ed, before this one signs."""
        if not self.lock.acquire(timeout):
            return False
        try:
            state = state or load(self.path)
            if state is None:
                raise InputError(
                    f"{self.loc.log_dir} is not sealed yet: run `mcpshim log seal --init` "
                    "(it prints the verifier to keep elsewhere)"
                )
            if state.log_dir != log_id(self.loc):
                raise InputError(f"{self.path} is the sealer state of {state.log_dir}")
            self.state = state
            self._wait_for_epoch(state)
            self._keys = keys.SealKeys(
                state.epoch,
                state.session,
                bytearray.fromhex(state.session_key),
                bytearray.fromhex(state.epoch_key),
            )
            self._move_to(self._epoch(time.time()))
            self._anchor_check()
        except BaseException:
            self.close()
            raise
        return True

    def _epoch(self, t: float) -> int:
        assert self.state is not None
        return (int(t) - self.state.origin) // self.state.period

    def _wait_for_epoch(self, state: State) -> None:
        """The key on disk is for an epoch not begun yet (the clock was set back): wait
        for it, when that is a matter of one period or two."""
        begins = state.origin + state.epoch * state.period
        wait = begins - time.time()
        if wait > 2 * state.period + 1:
            raise InputError(
                f"the sealer state's key is for {utc_stamp(begins * 1000)} on; the clock says "
                f"{utc_stamp(int(time.time() * 1000))}: was the clock set back?"
            )
        if wait > 0:
            time.sleep(wait)

    def _move_to(self, epoch: int) -> None:
        """Sign in `epoch` (a later one, or this session's own) from now on; the keys of
        the sessions after this one go to disk, fsync'ed, before this one signs."""
        assert self.state is not None and self._keys is not None
        self._keys.move_to(epoch)
        e, s, u, k = self._keys.for_state()
        self.state = replace(self.state, epoch=e, session=s, session_key=u, epoch_key=k)
        save(self.path, self.state, durable=True)

    def close(self) -> None:
        if self._keys is not None:
            self._keys.erase()
            self._keys = None
        self.lock.release()

    def _set(self, state: State) -> None:
        self.state = state

    def _warn_once(self, what: str) -> None:
        assert self.state is not None
        self.state, first = self.state.warn_once(what)
        if first:
            self.say(what)

    # -- one round ----------------------------------------------------------------------

    def pending(self) -> bool:
        """Anything to seal? (a stat per segment and a look at the boot anchors, without
        the log's lock)"""
        assert self.state is not None
        if self._anchors_changed():
            return True
        known = {(t.dev, t.ino): t for t in self.state.segments}
        for f in segment_files(self.loc):
            t = known.get((f.dev, f.ino))
            if (t.grew(f.size) or f.size < t.end) if t is not None else f.size > 0:
                return True
        return False

    def seal(self) -> list[Written]:
        """Seal every segment that grew; the state is saved (not fsync'ed) after."""
        assert self.state is not None
        written: list[Written] = []
        with log_lock(self.loc):
            files = segment_files(self.loc)
            known = self._known(files)
            seen = [i for i, f in enumerate(files) if (f.dev, f.ino) in known]
            first_new = seen[-1] + 1 if seen else 0
            if not files and self.state.n < 0:  # the genesis seal needs a file to go in
                _create_live(self.loc)
                files = segment_files(self.loc)
            kept: list[Tracked] = []
            self._boots = self._anchors()
            for i, f in enumerate(files):
                t = known.get((f.dev, f.ino))
                if t is None and i < first_new:
                    self._warn_once(
                        f"{f.path.name} is older than segments already sealed and was never "
                        "sealed itself: not sealing it (verify will name it)"
                    )
                    continue
                if t is None:
                    t = Tracked(self.state.last_segment + 1, f.dev, f.ino, 0)
                    self.state = replace(self.state, last_segment=t.no)
                # the chain's first seal; or the live segment's, for boot anchors that changed
                last = i == len(files) - 1
                genesis = last and (self.state.n < 0 or (not written and self._boots_due()))
                t = self._seal_file(f, t, written, genesis)
                kept.append(t)
            self.state = replace(self.state, segments=tuple(kept))
        save(self.path, self.state, durable=False)
        if written:
            self.last = written[-1]
        return written

    def _known(self, files: list[SegmentFile]) -> dict[tuple[int, int], Tracked]:
        """The segments we seal, by file: a file we do not know by its inode but that holds
        seals of a segment we numbered is that segment, copied or restored."""
        assert self.state is not None
        known = {(t.dev, t.ino): t for t in self.state.segments}
        by_no = {t.no: t for t in self.state.segments}
        for f in files:
            if (f.dev, f.ino) in known or f.size == 0:
                continue
            last = last_seal(f)
            if last is None or last[0].segment > self.state.last_segment:
                continue
            seal, at, end = last
            old = by_no.get(seal.segment)
            if old is not None and old.at == at:
                known[(f.dev, f.ino)] = replace(old, dev=f.dev, ino=f.ino)
            else:
                known[(f.dev, f.ino)] = Tracked(seal.segment, f.dev, f.ino, seal.end, at, end)
        return known

    def _seal_file(
        self, f: SegmentFile, t: Tracked, written: list[Written], genesis: bool
    ) -> Tracked:
        """Seal what `f` gained since `t.end`; `genesis`: the chain's first seal, which is
        written even over nothing, so that the chain has a known beginning."""
        assert self.state is not None and self._keys is not None
        flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(f.path, flags)
        except OSError as exc:
            self.say(f"{f.path}: cannot seal: {exc.strerror}")
            return t
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (f.dev, f.ino) or not stat.S_ISREG(st.st_mode):
                return t  # replaced since we looked: the next round sees the new file
            size = st.st_size
            if size < t.end:
                self.say(
                    f"{f.path.name} is {size} bytes, but {t.end} of it were sealed: "
                    "it was truncated (verify names what is missing)"
                )
                return replace(t, end=size)
            if not t.grew(size) and not genesis:
                return t
            with mapped(fd, size) as mm:
                start = self._adopt(mm, f, t)
                if start < size or genesis:
                    w = self._append(fd, mm, f, t, start, size)
                    written.append(w)
                    t = replace(t, at=w.at, mine_end=w.at + len(w.seal.encode()))
            return replace(t, end=size)
        finally:
            os.close(fd)

    def _adopt(self, mm: Buffer, f: SegmentFile, t: Tracked) -> int:
        """Seals in the new bytes that chain from our head were written by a sealer whose
        state write did not land (a crash): take them as ours. Any other seal is not ours."""
        assert self.state is not None
        start = t.end
        for p, e, seal, _ in find_seals(mm, t.end, len(mm)):
            st = self.state
            if p == t.at:
                continue
            if seal and (seal.n, seal.prev, seal.start) == (st.n + 1, st.head, start):
                self.state = replace(st, n=seal.n, head=head_of(mm[p:e]))
                start = seal.end
            else:
                self.say(f"{f.path.name}@{p}: a seal this sealer did not write (verify judges it)")
        return start

    def _append(
        self, fd: int, mm: Buffer, f: SegmentFile, t: Tracked, start: int, size: int
    ) -> Written:
        assert self.state is not None and self._keys is not None
        digest = sha256_of(mm, start, size)
        ms = int(time.time() * 1000)
        if self._epoch(ms // 1000) > self._keys.epoch:
            self._move_to(self._epoch(ms // 1000))
        ms = max(ms, (self.state.origin + self._keys.epoch * self.state.period) * 1000)
        boots = self._seal_boots(first=t.at < 0)
        seal = Seal(
            n=self.state.n + 1,
            key=self.state.key,
            origin=self.state.origin,
            period=self.state.period,
            epoch=self._keys.epoch,
            sealer=self._keys.session,
            segment=t.no,
            start=start,
            end=size,
            sha256=digest,
            spills=spill_digest(mm, start, size, self.loc.spill_dir),
            prev=self.state.head,
            time=utc_stamp(ms),  # never before its epoch began, if the clock went back
            boots=boots,
        )
        seal = replace(seal, mac=self._keys.sign(seal.message()))
        record = seal.encode()
        fdio.write_all(fd, record)
        at = os.lseek(fd, 0, os.SEEK_CUR) - len(record)  # O_APPEND leaves us at our end
        head = head_of(record)
        self.state = replace(self.state, n=seal.n, head=head)
        if boots:
            self.state = replace(self.state, boots=tuple(sorted(self._boots.items())))
        return Written(seal, head, f.path.name, at)

    # -- boot anchors ---------------------------------------------------------------------

    def _anchors(self) -> dict[str, str]:
        """The boot anchors as they are now; this boot's made when missing (the records
        of a boot without one have no time)."""
        found = anchor_texts(self.loc.boot_dir)
        boot = current_boot_id()
        if boot and boot not in found:
            with contextlib.suppress(OSError):
                write_boot_anchor(self.loc.boot_dir)
                found = anchor_texts(self.loc.boot_dir)
        # one the sealer sealed and that is gone now is sealed as gone ("")
        assert self.state is not None
        return {**{b: "" for b, _ in self.state.boots}, **found}

    def _anchors_changed(self) -> bool:
        assert self.state is not None
        return dict(self.state.boots) != {
            **{b: "" for b, _ in self.state.boots},
            **anchor_texts(self.loc.boot_dir),
        }

    def _boots_due(self) -> bool:
        assert self.state is not None
        return self._boots != dict(self.state.boots)

    def _seal_boots(self, first: bool) -> tuple[tuple[str, str, str], ...]:
        """The anchors this seal takes: those new or changed since the last sealed (all of
        them in a segment's first seal: rotation may remove the seals that had them), each
        with the sealer's own reading of its boot's start for this boot."""
        assert self.state is not None
        sealed = dict(self.state.boots)
        due = {b: v for b, v in self._boots.items() if first or sealed.get(b) != v}
        if not due:
            return ()
        here = current_boot_id()
        clock = f"{now_anchor():.6f}"
        return tuple((b, v, clock if b == here else "") for b, v in sorted(due.items()))

    # -- anchors ------------------------------------------------------------------------

    def _anchor_check(self) -> None:
        assert self.state is not None
        cfg = self.state.anchor
        if cfg.mode == "syslog" and (why := anchors.syslog_problem(cfg.socket)):
            self._warn_once(
                f"{why}: seals are not anchored outside this account. Anchor them with "
                "`mcpshim log seal --anchor-cmd CMD` (CMD gets each anchor line on stdin, "
                "e.g. 'cat >> /media/other/mcpshim-anchors')"
            )

    def anchor(self, final: bool) -> bool:
        """Send the last seal's head when due (every `interval` s while `run` seals, and
        always at the end of a session); False when it could not go."""
        assert self.state is not None
        st, last = self.state, self.last
        if last is None or st.anchored >= last.seal.n or st.anchor.mode == "none":
            return True
        if not final and time.time() - st.anchored_at < st.anchor.interval:
            return True
        if st.anchor.mode == "syslog" and anchors.syslog_problem(st.anchor.socket):
            return False
        why = anchors.send(st.anchor, anchors.anchor_line(st.log_dir, last.seal, last.head))
        if why:
            self._warn_once(f"anchor not sent ({st.anchor.mode}): {why}")
            save(self.path, self.state, durable=False)
            return False
        self.state = replace(st, anchored=last.seal.n, anchored_at=time.time())
        save(self.path, self.state, durable=False)
        return True
