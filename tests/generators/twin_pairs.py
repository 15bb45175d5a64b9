"""Simulated real/twin runs for the twin-assisted interval's coverage (tests/system/test_twin_ppi.py and
benchmarks/twin_ppi_bench.py draw them the same way, from here).

The real arm succeeds with probability p; the twin gives the same outcome with probability `agreement`, its
disagreements either way (an unbiased twin), all towards success ("too kind") or all towards failure ("too
harsh"); the twin also runs `twin_n` trials of its own at its own rate.
"""

from __future__ import annotations

import numpy as np

from harness.stats import ppi

BIASES = ("either way", "too kind", "too harsh")


def ppi_intervals(rng: np.random.Generator, runs: int, n: int, p: float, agreement: float, bias: str,
                  twin_n: int = 1000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(PPI low, PPI high, real successes) over `runs` simulated runs of `n` paired real/twin trials."""
    real = rng.random((runs, n)) < p
    if bias == "either way":
        flip, twin_rate = rng.random((runs, n)) < 1 - agreement, p * agreement + (1 - p) * (1 - agreement)
    elif bias == "too kind":
        share = min(1.0, (1 - agreement) / (1 - p))
        flip, twin_rate = ~real & (rng.random((runs, n)) < share), p + (1 - p) * share
    elif bias == "too harsh":
        share = min(1.0, (1 - agreement) / p)
        flip, twin_rate = real & (rng.random((runs, n)) < share), p - p * share
    else:
        raise ValueError(f"bias must be one of {BIASES}, not {bias!r}")
    twin = real ^ flip
    both, real_only, twin_only = (real & twin).sum(1), (real & ~twin).sum(1), (~real & twin).sum(1)
    own = rng.binomial(twin_n, twin_rate, size=runs)
    _, low, high = ppi.ppi_interval(both, real_only, twin_only, n - both - real_only - twin_only, own, twin_n)
    return low, high, both + real_only
