"""The record reader on its own: framing, field decoding, image building, as records/s.

Every command that reads the exec log (review, tree, log, report, approve...) pays this
first, so its figure is the floor the others are seen against. Writes review_scale's
log (1,000,000 records by default, framed exactly as the shims frame it) or reads one given
with --log, then times, in this process, each stage of the reading path cumulatively:

    read     the file in 4 MiB chunks, records counted by their end marker (the I/O floor)
    frame    the framing: the bytes between two end markers, one piece per record
    fields   + each piece cut into its fields and checked whole (no stray NUL)
    rows     frame + each exec record as a row (log.rows: the fields that link a process
             decoded per record, its tail once per distinct tail): what tree and review read
    link     + each row linked into its family (tree.Linker.add, a call per row)
    links    + the rows linked a run of 4,096 at a time (Linker.add_many, as tree and review
             link since issue 20's linking step): the least either does
    decode   + each record decoded (execlog.read_stream: ExecRecord / EventRecord)
    images   + each record made an Image (family.tree.images: the other commands' path)

Stages run in a new random order each round (--rounds, default 3), so load from elsewhere
on the machine falls on all alike; it prints each stage's median records/s, microseconds
per record, and its time as a ratio to `read`, the baseline of the same run.

    python benchmarks/reader_scale.py [--records N] [--log FILE] [--rounds R] [--stages a,b]

With PYTHONPATH set to another checkout's src, `--stages read,decode,images` times that
code on the same log (frame and fields use the reader's internals of this checkout; rows
and link exist from issue 20 on, links from its linking step).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcpshim.family import tree
from mcpshim.log import execlog
from review_scale import generate
from throwaway import throwaway_home


def _read(path: Path) -> int:
    n = 0
    last = b""
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            n += chunk.count(b"\0\n") + (last == b"\0" and chunk[:1] == b"\n")
            last = chunk[-1:]
    return n


def _frame(path: Path) -> int:
    from mcpshim.log import framing

    with open(path, "rb") as fh:
        return sum(1 for _ in framing.pieces(fh, path.name, []))


def _fields(path: Path) -> int:
    from mcpshim.log import framing

    n = 0
    with open(path, "rb") as fh:
        for _, piece in framing.pieces(fh, path.name, []):
            parts = piece.split(b"\0=")
            n += parts[0] == b"\0R" and piece.count(b"\0") == len(parts)
    return n


def _rows(path: Path) -> int:
    from mcpshim.log.rows import ExecRows

    with open(path, "rb") as fh:
        return sum(1 for _ in ExecRows().read(fh, path.name, None, []))


def _link(path: Path) -> int:
    from mcpshim.log.rows import ExecRows

    rows, linker = ExecRows(), tree.Linker()
    add, tails, n = linker.add, rows.tails, 0
    with open(path, "rb") as fh:
        for row in rows.read(fh, path.name, None, []):
            if isinstance(row, tuple):
                add(row[3], row[4], row[5], row[6], row[7], tails[row[2]].session)
                n += 1
    return n


def _links(path: Path) -> int:
    from mcpshim.log.rows import ExecRows

    rows, linker = ExecRows(), tree.Linker()
    tails, n = rows.tails, 0
    run: list[tuple[str, int, int | None, int | None, int | None, str]] = []
    with open(path, "rb") as fh:
        for row in rows.read(fh, path.name, None, []):
            if isinstance(row, tuple):
                run.append((row[3], row[4], row[5], row[6], row[7], tails[row[2]].session))
                if len(run) == 4096:
                    linker.add_many(*zip(*run, strict=True))
                    n += len(run)
                    run = []
    if run:
        linker.add_many(*zip(*run, strict=True))
    return n + len(run)


def _decode(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in execlog.read_stream(fh, path.name, None, []))


def _images(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in tree.images(execlog.read_stream(fh, path.name, None, [])))


STAGES: dict[str, Callable[[Path], int]] = {
    "read": _read,
    "frame": _frame,
    "fields": _fields,
    "rows": _rows,
    "link": _link,
    "links": _links,
    "decode": _decode,
    "images": _images,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--log", type=Path, help="Read this exec log instead of writing one.")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stages", default=",".join(STAGES), help="Comma-separated, read first.")
    args = ap.parse_args()
    tmp = None
    if args.log is None:
        tmp = Path(tempfile.mkdtemp(prefix="mcpshim-reader-"))
        size = generate(tmp / "log", tmp / "shims", args.records)
        path = tmp / "log" / "exec.log"
        print(f"generated {args.records:,} records, {size / 1e6:.1f} MB ({path})")
    else:
        path = args.log
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    stages = {n: STAGES[n] for n in dict.fromkeys(["read", *args.stages.split(",")])}
    times: dict[str, list[float]] = {name: [] for name in stages}
    counts: dict[str, int] = {}
    for _ in range(args.rounds):
        order = list(stages)
        random.shuffle(order)
        for name in order:
            t0 = time.perf_counter()
            counts[name] = stages[name](path)
            times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["read"])
    for name in stages:
        t = statistics.median(times[name])
        n = counts[name]
        print(
            f"{name:7} {n:>10,} records  {n / t:>11,.0f} records/s  {t / n * 1e6:6.2f} us/record"
            f"  x{t / base:6.1f} read   (runs: {', '.join(f'{x:.2f}' for x in times[name])} s)"
        )
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if tmp is not None:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    throwaway_home()
    main()
