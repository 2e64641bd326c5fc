"""`log verify`'s check of the boot anchors against what the seals say of them.

An exec record holds an uptime; `boot/<boot id>` turns it into a time. Edit the anchor and
every record of that boot moves (a traced exec leaves the tool call that started it), while
the log's bytes, and so its seals, stay intact. So the sealer seals the anchors too
(record.Seal.boots), and here each one is held to the last value sealed: changed since, or
changed between two seals, it was edited (`boot-anchor`, tampering), unless it is mcpshim's
precise reading of a shim's whole seconds (log.boot.refines). An anchor the sealer found
already at odds with its own clock when it first sealed it may have been edited before
(`boot-anchor-clock`: a gap, since a clock stepped since boot looks the same).
"""

from __future__ import annotations

from mcpshim.log.boot import anchor_texts, clock_seconds, refines
from mcpshim.seal.checks import Checks
from mcpshim.seal.ranges import Found

__all__ = ["CLOCK_SLACK_S", "check_boot_anchors"]

#: how far a boot anchor may be from the sealer's clock reading of the same boot's start
#: (a shim's anchor is whole seconds, truncated, and the clock drifts a little since boot)
CLOCK_SLACK_S = 2.0


def _same(old: str, new: str) -> bool:
    return new == old or refines(old, new)


def _shift(old: str, new: str) -> str:
    a, b = clock_seconds(old), clock_seconds(new)
    return f" (its records move by {b - a:+.3f} s)" if a is not None and b is not None else ""


def check_boot_anchors(c: Checks) -> None:
    sealed: dict[str, list[tuple[Found, str, str]]] = {}
    for f in c.chain:
        for boot, anchor, clock in f.seal.boots:
            sealed.setdefault(boot, []).append((f, anchor, clock))
    if not sealed:
        if c.chain:
            c.notes.append(
                "no seal holds the boot anchors (sealed by an older mcpshim): an edit of "
                "boot/<id> would re-date that boot's records unseen"
            )
        return
    files = anchor_texts(c.loc.boot_dir)
    for boot, entries in sorted(sealed.items()):
        where = f"boot/{boot}"
        _clock(c, where, entries)
        last_f, last = entries[0][0], entries[0][1]
        for f, anchor, _ in entries[1:]:
            if anchor and last and not _same(last, anchor):
                c.add(
                    "boot-anchor",
                    where,
                    f"{where} was {last} when seal {last_f.seal.n} sealed it and {anchor} "
                    f"when seal {f.seal.n} did: edited in between{_shift(last, anchor)}",
                    seals=(last_f.seal.n, f.seal.n),
                )
            if anchor:
                last_f, last = f, anchor
        now = files.get(boot)
        if now is None or not _same(last, now):
            what = "is gone" if now is None else f"holds {now or 'no anchor'}"
            c.add(
                "boot-anchor",
                where,
                f"{where} {what}, but seal {last_f.seal.n} sealed it as {last}: edited after "
                f"it was sealed, which re-dates every record of boot {boot}"
                + (_shift(last, now) if now else ""),
                seals=(last_f.seal.n,),
            )


def _clock(c: Checks, where: str, entries: list[tuple[Found, str, str]]) -> None:
    for f, anchor, clock in entries:
        a, k = clock_seconds(anchor), clock_seconds(clock)
        if a is None or k is None:
            continue
        slack = CLOCK_SLACK_S + (1.0 if anchor.isdigit() else 0.0)
        if abs(k - a) > slack:
            c.add(
                "boot-anchor-clock",
                where,
                f"when seal {f.seal.n} sealed it, {where} said the boot began at {anchor}, "
                f"but the clock said {clock} ({k - a:+.3f} s): edited before it was sealed, "
                "or the clock was set since",
                seals=(f.seal.n,),
            )
        return  # the first reading is the one that vouches for the anchor
