"""Twin-assisted success rates (issue 58, item 3): the prediction-powered interval's coverage, and the real
trials it saves for a target width (`harness.stats.ppi`).

Coverage: 10,000 simulated real/twin pairs of runs per setting. The real arm succeeds with probability p at each
of n trials; the twin gives the same outcome with probability `agreement`, its disagreements either way (an
unbiased twin), all towards success (too kind) or all towards failure (too harsh); the twin's own 1,000 trials
succeed at the twin's rate. The share of intervals holding p, against the real trials' own Wilson interval.

Savings: the real trials whose expected interval is at most the target width, alone (Wilson) and with the twin
(1,000 own trials), at the agreement measured for the reference ACT with no gap (60 of 60, lower 95 % bound 95.1 %)
and others; then the same n simulated, to show the width really reached.

    .venv/bin/python benchmarks/twin_ppi_bench.py [--pairs 10000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.stats import ppi  # noqa: E402
from tests.generators.twin_pairs import ppi_intervals  # noqa: E402

TWIN_N = 1000


def simulate(rng: np.random.Generator, pairs: int, n: int, p: float, agreement: float,
             bias: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(PPI low, high, Wilson low, high) over `pairs` simulated runs (drawn by tests/generators/twin_pairs.py)."""
    low, high, real_successes = ppi_intervals(rng, pairs, n, p, agreement, bias, TWIN_N)
    wl, wh = ppi.wilson(real_successes, n)
    return low, high, wl, wh


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=58)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(f"Coverage of the 95 % intervals, {args.pairs} simulated runs per setting; twin {TWIN_N} own trials.")
    print("Per agreement: the lowest coverage over n in (10, 20, 40, 80), p in (0.05, 0.2, 0.5, 0.8, 0.95) and the "
          "twin's bias (either way, too kind, too harsh), with its setting; the mean over them; Wilson alone beside.\n")
    print("| twin agreement | twin-assisted: lowest (setting) | mean | real alone (Wilson): lowest | mean |")
    print("|---:|---|---:|---:|---:|")
    se = np.sqrt(0.95 * 0.05 / args.pairs)
    for agreement in (0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0):
        rows = []
        for n in (10, 20, 40, 80):
            for p in (0.05, 0.2, 0.5, 0.8, 0.95):
                for bias in ("either way", "too kind", "too harsh"):
                    low, high, wl, wh = simulate(rng, args.pairs, n, p, agreement, bias)
                    rows.append((float(((low <= p) & (p <= high)).mean()), float(((wl <= p) & (p <= wh)).mean()),
                                 f"n {n}, p {p}, {bias}"))
        worst = min(rows)
        print(f"| {100 * agreement:.0f} % | {100 * worst[0]:.2f} % ({worst[2]}) | "
              f"{100 * np.mean([r[0] for r in rows]):.2f} % | {100 * min(r[1] for r in rows):.2f} % | "
              f"{100 * np.mean([r[1] for r in rows]):.2f} % |")
    print(f"\nMonte Carlo standard error of a coverage near 95 %: {100 * se:.2f} points.\n")

    print("Real trials for a 95 % interval of the target width (expected counts; unbiased twin, its disagreements "
          f"split evenly: the widest case), twin {TWIN_N} own trials; 'reached': the mean width over {args.pairs} "
          "simulated runs at that n.\n")
    print("| real rate | width | agreement | real alone (Wilson) | with the twin | fewer | reached: alone / twin |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for agreement, words in ((1.0, "100 % (60/60 measured)"), (0.951, "95.1 % (60/60's lower bound)"),
                             (0.9, "90 %"), (0.8, "80 %"), (0.5, "50 %")):
        for width in (0.3, 0.2, 0.15):
            for p in (0.2, 0.5, 0.8):
                alone = ppi.real_trials_for_width(p, None, width)
                helped = ppi.real_trials_for_width(p, agreement, width, TWIN_N)
                if alone is None:
                    continue
                fewer = f"{100 * (1 - helped / alone):.0f} %" if helped is not None else "none"
                reached = "-"
                if helped is not None:
                    low, high, _, _ = simulate(rng, args.pairs, helped, p, agreement, "either way")
                    _, _, wl, wh = simulate(rng, args.pairs, alone, p, agreement, "either way")
                    reached = f"{(wh - wl).mean():.3f} / {(high - low).mean():.3f}"
                print(f"| {p:.1f} | {width:.2f} | {words} | {alone} | {helped if helped is not None else '> 5000'} | "
                      f"{fewer} | {reached} |")
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
