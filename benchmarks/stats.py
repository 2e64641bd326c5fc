"""Shared by the benchmarks: when is a difference between two sets of timings measurable?

A difference is called measurable when the 95 % bootstrap interval of the difference of
medians leaves out zero. The A/A comparison (the baseline against a second, identical
baseline run alongside) shows how large a difference noise alone makes on this machine.

Timings taken in several sessions (server processes) of each variant are resampled the way
they were taken: sessions first, then calls within each chosen session (a hierarchical
bootstrap). Calls of one session are not independent of each other: a server process that
landed badly (its memory, its CPU) is slow for every call, and an interval that treats its
calls as independent samples calls that difference measurable. Measured through the SDK
(relay_sdk), two identical direct sessions differed by 0.14 ms with an interval of calls
alone excluding zero.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence


def p95(times: Sequence[float]) -> float:
    """The 95th percentile (statistics.quantiles' default method)."""
    return statistics.quantiles(times, n=20)[-1]


def grouped_diff_ci(
    a: Sequence[list[float]],
    b: Sequence[list[float]],
    stat: Callable[[list[float]], float] = statistics.median,
    resamples: int = 2000,
    seed: int = 1,
) -> tuple[float, float, float]:
    """`stat` of b's pooled timings minus a's (the median, or p95), and its 95 % interval
    from resampling sessions, then calls within each (one session each: the plain
    bootstrap)."""
    rng = random.Random(seed)

    def resample(groups: Sequence[list[float]]) -> float:
        pooled: list[float] = []
        for g in rng.choices(groups, k=len(groups)):
            pooled += rng.choices(g, k=len(g))
        return stat(pooled)

    diffs = sorted(resample(b) - resample(a) for _ in range(resamples))
    low, high = diffs[int(0.025 * resamples)], diffs[int(0.975 * resamples) - 1]
    point = stat([x for g in b for x in g]) - stat([x for g in a for x in g])
    return point, low, high


def grouped_median_diff_ci(
    a: Sequence[list[float]], b: Sequence[list[float]], resamples: int = 2000, seed: int = 1
) -> tuple[float, float, float]:
    """The median of b's pooled timings minus a's, with its interval (grouped_diff_ci)."""
    return grouped_diff_ci(a, b, statistics.median, resamples, seed)


def verdict(low: float, high: float) -> str:
    """'-' when the interval holds zero (not measurable at this sample size), else '+' or
    '<' for slower or faster than the baseline."""
    if low <= 0 <= high:
        return "-"
    return "+" if low > 0 else "<"
