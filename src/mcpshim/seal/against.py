"""The checks of `log verify` against what lies outside the log: the user's verifier (each
seal's MAC), the sealer's state file (what it wrote last), and the anchors read back."""

from __future__ import annotations

from collections.abc import Sequence

from mcpshim.seal import keys
from mcpshim.seal.anchors import Anchor
from mcpshim.seal.checks import Checks, covered, ns_text, span
from mcpshim.seal.state import State

__all__ = ["anchors", "macs", "state"]


def macs(c: Checks, verifiers: Sequence[keys.Verifier]) -> None:
    """Every seal's MAC under the user's verifier(s); seals of a key not given."""
    walkers = {w.id: w for w in (keys.KeyWalker(v) for v in verifiers)}
    foreign: dict[str, list[int]] = {}
    for f in c.chain:
        w = walkers.get(f.seal.key)
        if w is None:
            foreign.setdefault(f.seal.key, []).append(f.seal.n)
            continue
        s = f.seal
        same = (s.origin, s.period) == (w.v.origin, w.v.period)
        k = w.key(s.epoch, s.sealer) if same else None
        if k is None or keys.mac(k, s.message()) != s.mac:
            c.add(
                "forged",
                f.where,
                f"seal {s.n}'s MAC does not verify with your key for its time "
                f"({s.time}): the sealer did not make it (a chain recomputed from the "
                "plain hashes, or re-signed with a key taken later)",
                seals=(s.n,),
            )
    for kid, ns in foreign.items():
        c.add(
            "foreign-key",
            c.by_n[ns[0]].where,
            f"seal(s) {ns_text(tuple(ns))} were made with key {kid}, not a key you gave: "
            "the log was resealed",
            seals=tuple(ns),
        )


def state(c: Checks, state: State, verifiers: Sequence[keys.Verifier]) -> None:
    """The log against what the sealer wrote last: its last seal, each segment's end, and
    (with the verifier) its keys."""
    last = c.chain[-1] if c.chain else None
    if last is not None and state.n > last.seal.n:
        c.add(
            "truncated",
            last.where,
            f"the sealer wrote seals up to {state.n}; the log ends at seal {last.seal.n}: "
            "its tail was cut off",
            seals=span(last.seal.n + 1, state.n),
        )
    elif last is not None and state.n == last.seal.n and state.head != last.head:
        c.add("state-mismatch", last.where, "the log's last seal is not the one the sealer wrote")
    by_segment = {s.seals[0].seal.segment: s for s in c.scans if s.seals}
    for t in state.segments:
        s = by_segment.get(t.no)
        sealed = max((f.seal.end for f in s.seals), default=0) if s is not None else 0
        if s is not None and sealed < t.end:  # in sealed offsets: a removal moves the file
            c.add(
                "truncated",
                f"{s.name}@{s.tail}",
                f"the sealer sealed {s.name} up to {t.end}; its seals now end at {sealed}: "
                "its tail was cut off",
            )
    for w in (keys.KeyWalker(v) for v in verifiers):
        if w.id == state.key:
            u = w.key(state.epoch, state.session)
            k = w.epoch_key(state.epoch + 1)
            if u is None or k is None or (u.hex(), k.hex()) != (state.session_key, state.epoch_key):
                c.add(
                    "state-mismatch",
                    "sealer state",
                    "its key is not derived from your verifier",
                )


def anchors(c: Checks, found: Sequence[Anchor], log_id: str) -> tuple[int | None, int]:
    """Every anchor that names this log or its keys must name a seal the log holds;
    (the last seal anchored, how many anchors were checked)."""
    ids = {f.seal.key for f in c.chain}
    mine = [a for a in found if a.log == log_id or a.key in ids]
    if not mine:
        c.add("no-anchors", "anchors", "no anchor names this log or its keys")
        return None, 0
    last = c.chain[-1].seal.n if c.chain else -1
    through: int | None = None
    for a in mine:
        f = c.by_n.get(a.n)
        if f is not None and f.head == a.head:
            through = a.n if through is None else max(through, a.n)
        elif f is None and covered(a.n, a.n, c.removed()[0]):
            continue  # its segment went with `log rotate --keep`
        elif f is None and a.n > last:
            c.add(
                "truncated",
                a.where,
                f"seal {a.n} was anchored at {a.time} but is not in the log (it ends at seal "
                f"{last}): the tail was cut off",
                seals=(a.n,),
            )
        else:
            c.add(
                "anchor-mismatch",
                a.where,
                f"seal {a.n} as anchored at {a.time} is not the seal the log holds: "
                "the log was rewritten or replaced",
                seals=(a.n,),
            )
    if through is not None and through < last:
        c.notes.append(f"seals {through + 1}..{last} are not anchored yet")
    return through, len(mine)
