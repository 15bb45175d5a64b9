"""Blind comparisons with sequential stopping (issue 39): the decision procedure on simulated comparisons.

For each design (alpha, power, declared difference, declared comparisons) and each futility rule (before:
discordant pairs only; after: paired betting, concordant pairs too) the cap is the smallest that reaches the
power (`sequential.minimum_cap`); then, per setting, the same SIMS simulated comparisons (independent
Bernoulli trials, or rates that vary by start position), the type I error (A/A) or power (A better by the
difference), the pairs per arm used (mean, 95th percentile) against McNemar's fixed-sample design at the
same alpha and power, and the same numbers from the exact walk over the state distribution (the reference
the simulation is checked against).

With --wall: the wall time of an expert-vs-replay comparison on the simulated arm (as `harness run` with
two --policy flags, in a fresh process) against two separate runs of the same length (one per policy).

Run: .venv/bin/python benchmarks/comparison_bench.py [--sims 10000] [--wall]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.models import sequential as sq

ALPHA, POWER = 0.05, 0.8


def settings(diff: float) -> list[tuple[str, float, float]]:
    high, low = sq.least_favourable(diff)
    return [("A/A", 0.3, 0.3), ("A/A", 0.5, 0.5), ("A/A", 0.8, 0.8),
            ("A better", high, low), ("A better", 0.3 + diff, 0.3), ("A better", 0.8, 0.8 - diff)]


def outcomes(rng: np.random.Generator, sims: int, cap: int, p_first: float, p_second: float,
             spread: float) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's two trials; with `spread`, each start position is easier or harder for both arms alike
    (both rates shifted by +spread or -spread, equally likely): the pair's outcomes are correlated, and the
    mean rates and their difference stay exactly as declared."""
    shift = rng.choice([-spread, spread], size=(sims, cap)) if spread else 0.0
    return rng.random((sims, cap)) < p_first + shift, rng.random((sims, cap)) < p_second + shift


REPO = Path(__file__).resolve().parents[1]


def _harness(folder: Path, *argv: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))",
                    *argv], cwd=folder, check=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def wall() -> None:
    import yaml

    from harness.models.scoresheet import load_scoresheet

    folder = Path(tempfile.mkdtemp(prefix="comparison-bench-"))
    data = yaml.safe_load((REPO / "protocols" / "randomized.yaml").read_text())
    data["trials"] = [t for t in data["trials"] if t["dx_cm"] ** 2 + t["dy_cm"] ** 2 >= 9][:8]
    data["generator"] = None
    data["episode_time_limit_s"] = 12.0
    data["stopping_rule"] = {"kind": "sequential", "alpha": 0.05, "power": 0.8, "min_difference": 0.3,
                             "max_trials_per_arm": 76}
    (folder / "cmp.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    common = ["--robot", "sim", "--headless", "--no-video"]
    compared = _harness(folder, "run", "cmp.yaml", "--policy", "expert", "--policy", "replay", *common)
    sheet = load_scoresheet(folder / "scoresheets" / "cmp-comparison.yaml")
    per_arm = len(sheet.scored_attempts()) // 2
    positions = data["trials"]
    data["trials"] = [{**positions[i % len(positions)], "index": i + 1} for i in range(per_arm)]
    data["stopping_rule"] = {"kind": "fixed"}
    (folder / "fixed.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    separate = [_harness(folder, "run", "fixed.yaml", "--policy", policy, *common) for policy in ("expert", "replay")]
    print(f"| comparison (expert vs replay, {per_arm} trials per arm, one process) | {compared:.1f} s |")
    print(f"| two separate runs of {per_arm} trials (expert {separate[0]:.1f} s + replay {separate[1]:.1f} s) | "
          f"{sum(separate):.1f} s |")
    print(f"decision: {sheet.stopped_by_rule()}; {os.getloadavg()[0]:.1f} load average")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=10_000)
    parser.add_argument("--wall", action="store_true")
    args = parser.parse_args()
    if args.wall:
        wall()
        return
    rng = np.random.default_rng(20261202)
    before, after = sq.FutilityRule.DISCORDANT_SPRT, sq.FutilityRule.PAIRED_BETTING
    print(f"{args.sims} simulated comparisons per setting; alpha {ALPHA}, power {POWER}; before = futility "
          f"{before.value}, after = {after.value} (the same simulated outcomes through both)")
    print("| diff | K | cap before/after | fixed n | setting | rates | positions | P(A better) | P(B better) | "
          "futility | cap hit | mean pairs before/after | p95 before/after | exact P(A) | exact mean | "
          "saved before/after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    started = time.perf_counter()
    saved: dict[sq.FutilityRule, list[float]] = {before: [], after: []}
    weakest = []
    for diff, comparisons in ((0.2, 1), (0.3, 1), (0.2, 3)):
        caps = {rule: sq.minimum_cap(ALPHA, POWER, diff, comparisons, rule) for rule in (before, after)}
        designs = {rule: sq.design(ALPHA, POWER, diff, comparisons, caps[rule], rule) for rule in (before, after)}
        fixed = designs[after].fixed_sample_pairs()
        longest = max(caps.values())
        # the power at every pair of rates with this difference (exact walk, independent trials)
        grid = [sq.operating_characteristics(designs[after], *sq.discordance(low + diff, low), caps[after])
                .first_better for low in np.arange(0.0, 1 - diff + 1e-9, 0.05)]
        weakest.append((diff, comparisons, min(grid)))
        for name, p_first, p_second in settings(diff):
            for spread in (0.0, 0.15):
                first, second = outcomes(rng, args.sims, longest, p_first, p_second, spread)
                used, code = {}, None
                for rule in (before, after):
                    code, used[rule] = sq.simulate(designs[rule], first, second, caps[rule])
                    saved[rule].append(1 - used[rule].mean() / fixed)
                assert code is not None
                exact = (sq.operating_characteristics(designs[after], *sq.discordance(p_first, p_second), caps[after])
                         if spread == 0 else None)
                print(f"| {diff} | {comparisons} | {caps[before]}/{caps[after]} | {fixed} | {name} | "
                      f"{p_first:.2f}/{p_second:.2f} | {'vary' if spread else 'same'} | {np.mean(code == 1):.4f} | "
                      f"{np.mean(code == -1):.4f} | {np.mean(code == 0):.3f} | {np.mean(code == 2):.3f} | "
                      f"{used[before].mean():.1f}/{used[after].mean():.1f} | "
                      f"{np.percentile(used[before], 95):.0f}/{np.percentile(used[after], 95):.0f} | "
                      f"{exact.first_better if exact else float('nan'):.4f} | "
                      f"{exact.expected_pairs if exact else float('nan'):.1f} | "
                      f"{100 * saved[before][-1]:.0f} %/{100 * saved[after][-1]:.0f} % |")
    print(f"\nmean saving over all settings: before {100 * np.mean(saved[before]):.1f} %, after "
          f"{100 * np.mean(saved[after]):.1f} %; {time.perf_counter() - started:.1f} s wall, load average "
          f"{os.getloadavg()[0]:.1f}")
    for diff, comparisons, power in weakest:
        print(f"after, diff {diff}, K {comparisons}: lowest exact power over success rates 0.00..{1 - diff:.2f} "
              f"(step 0.05) against {diff:g} less: {power:.4f}")


if __name__ == "__main__":
    main()
