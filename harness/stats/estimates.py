"""Small, dependency-free statistics for success rates over tens of trials."""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95% Wilson score interval: unlike the normal approximation it stays inside [0, 1]
    and keeps its coverage at 0/n and n/n, which small robot runs hit often."""
    low, high = wilson_arrays(successes, n, z)
    return (float(low), float(high))


def wilson_arrays(k: Any, n: Any, z: float = 1.959963984540054) -> tuple[Any, Any]:
    """`wilson_interval` over arrays of counts alike (the twin-assisted interval and its benchmark draw thousands
    at once); 0 of 0 is (0, 1)."""
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    safe = np.maximum(n, 1)
    p = k / safe
    denom = 1 + z * z / safe
    centre = (p + z * z / (2 * safe)) / denom
    half = z * np.sqrt(p * (1 - p) / safe + z * z / (4 * safe * safe)) / denom
    low = np.where(k == 0, 0.0, np.maximum(0.0, centre - half))
    high = np.where(k == n, 1.0, np.minimum(1.0, centre + half))
    return np.where(n == 0, 0.0, low), np.where(n == 0, 1.0, high)


def describe(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "n": len(values),
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "max": max(values),
    }


def mean_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float | None, float | None] | None:
    """(mean, low, high): Student's t interval for the mean. None without values; with one value the interval
    is (None, None): one value says nothing of how they spread."""
    if not values:
        return None
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None, None
    from scipy.stats import t

    half = float(t.ppf(0.5 + confidence / 2, len(values) - 1)) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile; q in [0, 100]."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (b: only A succeeded, c: only B)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact p-value for k1/n1 vs k2/n2 (sum of tables no likelier than the one seen)."""
    total_k, total = k1 + k2, n1 + n2

    def prob(x: int) -> float:
        return math.comb(n1, x) * math.comb(n2, total_k - x) / math.comb(total, total_k)

    observed = prob(k1)
    low, high = max(0, total_k - n2), min(n1, total_k)
    return min(1.0, sum(p for x in range(low, high + 1) if (p := prob(x)) <= observed * (1 + 1e-7)))


def newcombe_unpaired(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """95% interval for p1 - p2 from independent samples (Newcombe's hybrid score, method 10)."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_interval(k1, n1)
    l2, u2 = wilson_interval(k2, n2)
    d = p1 - p2
    return (d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))


def newcombe_paired(a: int, b: int, c: int, d: int) -> tuple[float, float]:
    """95% interval for pA - pB from paired outcomes (Newcombe 1998, method 10).

    a: both succeed, b: only A, c: only B, d: neither.
    """
    n = a + b + c + d
    if n == 0:
        return (-1.0, 1.0)
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(a + b, n)
    l2, u2 = wilson_interval(a + c, n)
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    if denom == 0:
        phi = 0.0
    else:
        num = float(a * d - b * c)
        if num > 0:
            num = max(num - n / 2, 0.0)
        phi = num / math.sqrt(denom)
    dl = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    du = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    diff = p1 - p2
    return (max(-1.0, diff - dl), min(1.0, diff + du))


def _normal_quantile(q: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(q))


def trials_needed(p0: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Trials per policy to detect p0 -> p0 + delta with a two-sided test (normal approximation)."""
    p1 = p0 + delta
    if not (0 < p0 < 1 and 0 < p1 < 1) or delta == 0:
        raise ValueError("p0 and p0 + delta must lie strictly between 0 and 1, and delta must not be 0")
    za, zb = _normal_quantile(1 - alpha / 2), _normal_quantile(power)
    pbar = (p0 + p1) / 2
    n = (za * math.sqrt(2 * pbar * (1 - pbar)) + zb * math.sqrt(p0 * (1 - p0) + p1 * (1 - p1))) ** 2 / delta**2
    return math.ceil(n)


def minimum_detectable_effect(p0: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest improvement over p0 that n trials per policy detect with the given power."""
    low, high = 1e-4, 1 - p0 - 1e-4
    if high <= low or trials_needed(p0, high, alpha, power) > n:
        return float("nan")
    for _ in range(60):
        mid = (low + high) / 2
        if trials_needed(p0, mid, alpha, power) <= n:
            high = mid
        else:
            low = mid
    return high


def expected_wilson_width(p: float, n: int) -> float:
    """Width of the 95% Wilson interval at the expected success count."""
    low, high = wilson_interval(round(p * n), n)
    return high - low
