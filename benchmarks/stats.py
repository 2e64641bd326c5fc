"""Shared by the benchmarks: when is a difference between two sets of timings measurable?

A difference is called measurable when the 95 % bootstrap interval of the difference of
medians leaves out zero. The A/A comparison (the baseline against a second, identical
baseline run alongside) shows how large a difference noise alone makes on this machine.
"""

from __future__ import annotations

import random
import statistics


def median_diff_ci(
    a: list[float], b: list[float], resamples: int = 2000, seed: int = 1
) -> tuple[float, float, float]:
    """median(b) - median(a), and its 95 % bootstrap interval (low, high)."""
    rng = random.Random(seed)
    diffs = sorted(
        statistics.median(rng.choices(b, k=len(b))) - statistics.median(rng.choices(a, k=len(a)))
        for _ in range(resamples)
    )
    low, high = diffs[int(0.025 * resamples)], diffs[int(0.975 * resamples) - 1]
    return statistics.median(b) - statistics.median(a), low, high


def verdict(low: float, high: float) -> str:
    """'-' when the interval holds zero (not measurable at this sample size), else '+' or
    '<' for slower or faster than the baseline."""
    if low <= 0 <= high:
        return "-"
    return "+" if low > 0 else "<"
