"""`Linker.add_many` links a run of records exactly as `Linker.add` on each in turn.

Fuzzed records over a small pid space (so pids are reused past the linker's memory of a
few processes per pid), two boots, sessions, exec chains (a record repeating an earlier
identity), starts out of order, missing or negative starts and ppids, a parent's start
given, parents that turn up after their children: every record's node, parent, family and
flags, and the linker's state after, are compared with one `add` per record.
"""

from __future__ import annotations

import random

import pytest

from mcpshim.family.linker import NOT_NEW, Linker

Rec = tuple[str, int, int | None, int | None, int | None, str]


def _records(rnd: random.Random, n: int) -> list[Rec]:
    out: list[Rec] = []
    clock = 1000
    for _ in range(n):
        if out and rnd.random() < 0.15:  # an exec chain: the same process again
            prev = rnd.choice(out[-20:])
            out.append((*prev[:2], rnd.choice([prev[2], prev[2], None]), *prev[3:]))
            continue
        clock += rnd.randint(0, 3)
        start: int | None = clock - (rnd.randint(0, 40) if rnd.random() < 0.2 else 0)
        if rnd.random() < 0.05:
            start = rnd.choice([None, -1, 0])
        pid = rnd.randint(1, 12)
        ppid = rnd.choice([None, pid, *range(1, 13)]) if rnd.random() < 0.1 else rnd.randint(1, 12)
        pstart = None
        if rnd.random() < 0.08 and out:
            pstart = rnd.choice(out)[3]
        out.append(
            (
                rnd.choice(["b1", "b1", "b1", "b2"]),
                pid,
                ppid,
                start,
                pstart,
                rnd.choice(["", "", "s1", "s2", "s3"]),
            )
        )
    return out


def _state(linker: Linker) -> tuple[object, ...]:
    return (
        linker._procs,
        linker._unknown,
        list(linker._node_fam),
        list(linker._node_sess),
        [linker.family_of_family(f) for f in range(len(linker._fam_parent))],
        linker._sessions,
        linker.unknown_pid,
    )


def _one_by_one(linker: Linker, recs: list[Rec]) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for r in recs:
        link = linker.add(*r)
        out.append(
            (
                link.node,
                link.parent if link.new else NOT_NEW,
                linker.family(link.node),
                link.unknown_parent,
                link.adopted,
            )
        )
    return out


def _many(linker: Linker, recs: list[Rec]) -> list[tuple[object, ...]]:
    links = linker.add_many(*(list(col) for col in zip(*recs, strict=True)))
    return [
        (
            links.node[i],
            links.parent[i] if links.parent[i] != -1 else None,
            links.family[i],
            i in links.unknown_parent,
            links.adopted.get(i),
        )
        for i in range(len(recs))
    ]


@pytest.mark.parametrize("seed", range(40))
def test_add_many_links_as_add_does_record_by_record(seed: int) -> None:
    rnd = random.Random(seed)
    recs = _records(rnd, 600)
    one, many = Linker(), Linker()
    want = _one_by_one(one, recs)
    got: list[tuple[object, ...]] = []
    i = 0
    while i < len(recs):  # runs of any length, some linked one by one in between
        k = rnd.choice([1, 2, 7, 50, 300])
        if rnd.random() < 0.2:
            got += _one_by_one(many, recs[i : i + k])
        else:
            got += _many(many, recs[i : i + k])
        i += k
    assert got == want
    assert _state(many) == _state(one)


def test_the_fuzzed_records_reach_every_case() -> None:
    """The records above do reuse pids past the remembered few, chain execs, find parents
    by their start, and adopt missing parents that turn up."""
    linker = Linker()
    recs = _records(random.Random(0), 600)
    links = _one_by_one(linker, recs)
    assert sum(1 for x in links if x[1] == NOT_NEW) > 50
    assert sum(1 for x in links if x[3]) > 20
    assert sum(1 for x in links if x[4] is not None) > 3
    assert sum(1 for r in recs if r[4] is not None) > 10
    assert linker.nodes > 12 * 5
