"""Twin-assisted success rates: prediction-powered inference (Angelopoulos, Bates, Fannjiang, Jordan and Zrnic,
"Prediction-powered inference", Science 2023) with the twin (`harness twin`) as the predictor.

A real arm's success rate from n trials has an interval about 1 / sqrt(n) wide. The twin runs the same policy in
the simulator, where trials are cheap: its success rate over N simulated trials (at the protocol's positions and
more) is precise but may be biased (the reality gap). Each real attempt also has its twin at the same start, so
the bias is measured directly, pair by pair:

    real rate = twin rate (N simulated trials) + (real rate - twin rate) on the n paired starts

The first term is estimated from N, the second from the n pairs. When the twin agrees with the arm, the paired
differences are mostly zero and the second term is known tightly from few real trials; when it does not, the
differences are large and the interval widens, down to no gain at all, but it stays valid: nothing assumes the
twin is any good. The twin's N trials must be drawn independently of the n real starts (the same start
distribution, other draws).

The interval: the twin's rate with its exact (Clopper-Pearson) interval, the paired difference with Newcombe's
interval for paired proportions (method 10, as `harness.stats.estimates.newcombe_paired`, its margins' intervals
exact too), the two summed by MOVER (Zou and Donner 2008: each bound from the two intervals' distances, as
Newcombe's method 10 itself combines two). PPI's own normal interval is not used: when every pair agreed it
estimates the rectifier's variance as zero and claims the twin is unbiased after a handful of real trials.
Wilson margins were tried first and dipped to 94.0 % coverage at 20 trials (as Wilson's own interval does for
a single rate at small n); the exact margins keep the coverage at 95 % or more on every setting tried
(`benchmarks/twin_ppi_bench.py`, docs/benchmarks.md "Twin-assisted success rates"), at twin agreement from 0 %
(a twin that always disagrees) to 100 %.

Everything is vectorised (numpy arrays of counts), so the benchmark checks coverage over 10,000 simulated
real/twin pairs per setting in well under a second; a sheet's report calls the same code with plain integers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.stats.estimates import wilson_arrays

Z95 = 1.959963984540054
# `harness twin --extra N` numbers the twin's own trials (at the protocol's starts, not paired with a real attempt)
# from here, above any real protocol's trial index: the report tells them from the paired ones by this alone.
TWIN_EXTRA_BASE = 900_000


def wilson(k: Any, n: Any, z: float = Z95) -> tuple[Any, Any]:
    """The Wilson score interval for k of n, over arrays (`harness.stats.estimates.wilson_arrays`)."""
    return wilson_arrays(k, n, z)


def clopper_pearson(k: Any, n: Any, z: float = Z95) -> tuple[Any, Any]:
    """The exact (Clopper-Pearson) interval at the two-sided level z stands for: never below its coverage."""
    from scipy.stats import beta, norm

    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    tail = float(norm.sf(z))
    low = np.where(k <= 0, 0.0, beta.ppf(tail, np.maximum(k, 1e-9), n - k + 1))
    high = np.where(k >= n, 1.0, beta.ppf(1 - tail, k + 1, np.maximum(n - k, 1e-9)))
    return np.nan_to_num(low, nan=0.0), np.nan_to_num(high, nan=1.0)


Bounds = Callable[[Any, Any, float], tuple[Any, Any]]


def newcombe_paired(both: Any, only_first: Any, only_second: Any, neither: Any, z: float = Z95,
                    bounds: Bounds = wilson) -> tuple[Any, Any]:
    """Newcombe's method 10 for p_first - p_second from paired outcomes (`harness.stats.estimates.newcombe_paired`,
    vectorised), its two margins' intervals from `bounds` (Wilson's, as Newcombe's; or the exact ones)."""
    a, b, c, d = (np.asarray(x, dtype=float) for x in (both, only_first, only_second, neither))
    n = a + b + c + d
    safe = np.maximum(n, 1)
    p1, p2 = (a + b) / safe, (a + c) / safe
    l1, u1 = bounds(a + b, n, z)
    l2, u2 = bounds(a + c, n, z)
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    num = a * d - b * c
    num = np.where(num > 0, np.maximum(num - n / 2, 0.0), num)
    phi = np.where(denom == 0, 0.0, num / np.sqrt(np.where(denom == 0, 1.0, denom)))
    dl = np.sqrt(np.maximum(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    du = np.sqrt(np.maximum(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    diff = p1 - p2
    low, high = np.maximum(-1.0, diff - dl), np.minimum(1.0, diff + du)
    return np.where(n == 0, -1.0, low), np.where(n == 0, 1.0, high)


@dataclass(frozen=True)
class TwinAssisted:
    """The prediction-powered estimate of a real success rate, beside the real trials' own."""

    real_successes: int
    real_trials: int              # paired: each real attempt with its twin at the same start
    twin_paired_successes: int
    agreement: int                # pairs where real and twin agree on success
    twin_successes: int           # the twin's own N simulated trials
    twin_trials: int
    estimate: float
    low: float
    high: float
    real_low: float               # the real trials alone: Wilson
    real_high: float

    @property
    def width(self) -> float:
        return self.high - self.low

    @property
    def real_width(self) -> float:
        return self.real_high - self.real_low


def ppi_interval(both: Any, real_only: Any, twin_only: Any, neither: Any, twin_k: Any, twin_n: Any,
                 z: float = Z95) -> tuple[Any, Any, Any]:
    """(estimate, low, high) of the real success rate. Paired counts over the n real attempts: both succeeded,
    only the real arm, only its twin, neither; `twin_k` of `twin_n`: the twin's own simulated trials."""
    n = np.asarray(both) + real_only + twin_only + neither
    twin_rate = np.asarray(twin_k, dtype=float) / np.maximum(twin_n, 1)
    twin_low, twin_high = clopper_pearson(twin_k, twin_n, z)
    shift = (np.asarray(real_only, dtype=float) - twin_only) / np.maximum(n, 1)
    shift_low, shift_high = newcombe_paired(both, real_only, twin_only, neither, z, clopper_pearson)
    estimate = twin_rate + shift
    low = estimate - np.sqrt((twin_rate - twin_low) ** 2 + (shift - shift_low) ** 2)
    high = estimate + np.sqrt((twin_high - twin_rate) ** 2 + (shift_high - shift) ** 2)
    return np.clip(estimate, 0, 1), np.clip(low, 0, 1), np.clip(high, 0, 1)


def twin_assisted(real: list[bool], twin_paired: list[bool], twin_k: int, twin_n: int) -> TwinAssisted:
    """From a real sheet's attempts and their twins (same order), and the twin's own N trials."""
    if len(real) != len(twin_paired):
        raise ValueError(f"{len(real)} real attempts against {len(twin_paired)} twins: they must pair")
    both = sum(1 for r, t in zip(real, twin_paired, strict=True) if r and t)
    real_only = sum(1 for r, t in zip(real, twin_paired, strict=True) if r and not t)
    twin_only = sum(1 for r, t in zip(real, twin_paired, strict=True) if t and not r)
    neither = len(real) - both - real_only - twin_only
    estimate, low, high = ppi_interval(both, real_only, twin_only, neither, twin_k, twin_n)
    real_low, real_high = wilson(both + real_only, len(real))
    return TwinAssisted(both + real_only, len(real), both + twin_only, both + neither, twin_k, twin_n,
                        float(estimate), float(low), float(high), float(real_low), float(real_high))


def expected_widths(p: float, agreement: float, n: int, twin_n: int) -> tuple[float, float]:
    """(real-only Wilson width, twin-assisted width) at the expected counts: real rate p, the twin agreeing with
    the arm on a share `agreement` of attempts, its disagreements split evenly between the two directions (no
    bias: the widest case for a given agreement), n real trials and twin_n simulated ones."""
    each_way = (1 - agreement) * n / 2   # real succeeded and the twin not, and the other way round
    both, neither = max(p * n - each_way, 0.0), max((1 - p) * n - each_way, 0.0)
    _, low, high = ppi_interval(both, each_way, each_way, neither, p * twin_n, twin_n)
    real_low, real_high = wilson(p * n, n)
    return float(real_high - real_low), float(high - low)


def real_trials_for_width(p: float, agreement: float | None, width: float, twin_n: int = 0,
                          most: int = 5000) -> int | None:
    """The fewest real trials whose expected interval is at most `width` wide: real trials alone (agreement None)
    or with the twin's twin_n simulated trials at this agreement. None: not within `most` trials."""
    def fits(n: int) -> bool:
        real, assisted = expected_widths(p, agreement if agreement is not None else 1.0, n, max(twin_n, 1))
        return (real if agreement is None else assisted) <= width

    if not fits(most):
        return None
    low, high = 1, most
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return low
