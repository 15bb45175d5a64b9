"""Blind comparisons with sequential stopping (issues 39, 57): the decision procedure on simulated comparisons.

After = what a comparison locks now: the anytime-valid mixture over the discordant odds against Ville's bound,
futility by the mean of two paired bets (`paired-betting-mixture`), the cap sized for the declared power
whatever the dependence between the arms (every pair discordant), each block's position drawn from the locked
seed. Before (default, `--before paired-betting`) = the same with futility by one paired bet (what issue 57
locked first). `--before sprt` = the design sheets were locked with until issue 57: a point-alternative SPRT
whose bound is calibrated to its cap with binding futility, the cap sized at the least favourable
*independent* rates, start positions cycled in the protocol's order. The same simulated outcomes go through
both (except, with `--before sprt`, in the interaction rows, where each design gets its own schedule).

"Saved" is against two fixed-sample McNemar designs at the same alpha and power: the one sized at the least
favourable *independent* rates (what the report prints; short of its power when the arms are negatively
dependent) and the one sized for the dependence the cap is sized for, every pair discordant (the honest
baseline for a design that guarantees its power at every dependence).

Settings, per declared difference d in 0.1, 0.15, 0.2, 0.3 (one declared comparison):
* equal policies (A/A) at base rates 0.1 to 0.95 and A better by d from several base rates, each with
  independent arms, positively dependent arms (P(both) half-way from independence to its maximum) and
  negatively dependent arms (P(both) at its minimum: one succeeds exactly where the other fails, as far as
  the rates allow);
* arm-by-position interaction over 16 start positions: a step (A strong on the left half, B on the right)
  and a smooth slope across the workspace, with equal average success (A/A) or A better by d on average.
Tuned on (the mixture's prior, the futility share): d = 0.2 at 0.60/0.40, independent and negatively
dependent. Every other row is out of sample.

Then three arms (K = 3, every pair declared): how much a *run* saves (it lasts until its slowest comparison
stops), not one comparison.

With --wall: the wall time of an expert-vs-replay comparison on the simulated arm (as `harness run` with
two --policy flags, in a fresh process) against two separate runs of the same length (one per policy).

Run: .venv/bin/python benchmarks/comparison_bench.py [--sims 10000] [--quick] [--before sprt] [--wall]
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.models.comparison import PositionRule, block_positions
from harness.stats import sequential as sq

ALPHA, POWER = 0.05, 0.8
POSITIONS = 16
CHUNK = 2_000
# The old design's caps (`sq.minimum_cap(..., efficacy=CALIBRATED_SPRT)`): its 2-D exact walk is O(cap^3) and
# d = 0.1 takes minutes, so the search runs once and is written here; --old-caps recomputes them.
OLD_CAPS = {(0.3, 1): 76, (0.2, 1): 176, (0.2, 3): 231, (0.15, 1): 328, (0.1, 1): 782}


@dataclass(frozen=True)
class Setting:
    name: str
    dependence: str          # independent, positive, negative, step, smooth
    p_first: float           # average success rates
    p_second: float

    @property
    def null(self) -> bool:
        return self.p_first == self.p_second


def settings(diff: float) -> list[Setting]:
    found = []
    for base in (0.1, 0.3, 0.5, 0.8, 0.95):
        for dependence in ("independent", "positive", "negative"):
            found.append(Setting("A/A", dependence, base, base))
    for name in ("step", "smooth"):
        found.append(Setting("A/A", name, 0.5, 0.5))
    high, low = sq.least_favourable(diff)
    for p_second in sorted({0.1, round(low, 3), 0.95 - diff}):
        for dependence in ("independent", "positive", "negative"):
            found.append(Setting("A better", dependence, p_second + diff, p_second))
    for name in ("step", "smooth"):
        found.append(Setting("A better", name, high, low))
    return found


def pairs(rng: np.random.Generator, sims: int, cap: int, setting: Setting, diff: float,
          rule: PositionRule) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's two outcomes. Dependence: the four cells (both, only A, only B, neither) drawn at once.
    Interaction: each block's start position by the schedule's rule, the arms independent given it."""
    p_first, p_second = setting.p_first, setting.p_second
    if setting.dependence in ("step", "smooth"):
        x = (np.arange(POSITIONS) + 0.5) / POSITIONS
        shape = np.where(x < 0.5, 1.0, -1.0) if setting.dependence == "step" else 1 - 2 * x
        swing = min(0.4, 0.5 - abs(0.5 - p_first) - 0.01, 0.5 - abs(0.5 - p_second) - 0.01) if setting.null else 0.3
        p_a, p_b = p_first + swing * shape, p_second - swing * shape
        seeds = rng.integers(0, 2**63 - 1, size=sims)
        at = np.stack([block_positions(int(seed), POSITIONS, cap, rule) for seed in seeds])
        return rng.random((sims, cap)) < p_a[at], rng.random((sims, cap)) < p_b[at]
    independent = p_first * p_second
    if setting.dependence == "independent":
        both = independent
    elif setting.dependence == "positive":
        both = independent + 0.5 * (min(p_first, p_second) - independent)
    else:
        both = max(0.0, p_first + p_second - 1)
    only_first, only_second = p_first - both, p_second - both
    u = rng.random((sims, cap))
    a_only = u < only_first
    b_only = (u >= only_first) & (u < only_first + only_second)
    together = (u >= only_first + only_second) & (u < only_first + only_second + both)
    return a_only | together, b_only | together


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
                             "max_trials_per_arm": 241}
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


def old_caps(recompute: bool) -> dict[tuple[float, int], int]:
    if not recompute:
        return OLD_CAPS
    found = {}
    for diff, comparisons in OLD_CAPS:
        cap = sq.minimum_cap(ALPHA, POWER, diff, comparisons, efficacy=sq.EfficacyRule.CALIBRATED_SPRT)
        assert cap is not None
        found[(diff, comparisons)] = cap
        print(f"old cap, d {diff}, K {comparisons}: {cap}", flush=True)
    return found


@dataclass
class Tally:
    code: list[np.ndarray]
    used: list[np.ndarray]

    def rate(self, value: int | tuple[int, ...]) -> tuple[float, float]:
        code = np.concatenate(self.code)
        hit = np.isin(code, value)
        p = float(hit.mean())
        return p, math.sqrt(max(p * (1 - p), 1e-12) / code.size)

    def mean(self) -> tuple[float, float]:
        used = np.concatenate(self.used)
        return float(used.mean()), float(used.std(ddof=1) / math.sqrt(used.size))


def one_setting(rng: np.random.Generator, sims: int, setting: Setting, diff: float,
                designs: dict[str, sq.SequentialDesign]) -> dict[str, Tally]:
    cycled = designs["before"].efficacy is sq.EfficacyRule.CALIBRATED_SPRT
    rules = {"before": PositionRule.CYCLE if cycled else PositionRule.DRAWN, "after": PositionRule.DRAWN}
    tallies = {name: Tally([], []) for name in designs}
    interaction = cycled and setting.dependence in ("step", "smooth")
    longest = max(d.cap for d in designs.values())
    for start in range(0, sims, CHUNK):
        count = min(CHUNK, sims - start)
        shared = None if interaction else pairs(rng, count, longest, setting, diff, PositionRule.DRAWN)
        for name, rule_design in designs.items():
            first, second = shared if shared is not None else pairs(rng, count, rule_design.cap, setting, diff,
                                                                      rules[name])
            code, used = sq.simulate(rule_design, first, second, rule_design.cap)
            tallies[name].code.append(code)
            tallies[name].used.append(used)
    return tallies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="2,000 comparisons per setting, d 0.2 and 0.3 only")
    parser.add_argument("--old-caps", action="store_true", help="recompute the old design's caps (minutes)")
    parser.add_argument("--before", choices=("paired-betting", "sprt"), default="paired-betting",
                        help="the design compared against: one futility bet (default) or the pre-issue-57 SPRT")
    parser.add_argument("--wall", action="store_true")
    args = parser.parse_args()
    if args.wall:
        wall()
        return
    sims = 2_000 if args.quick else args.sims
    diffs = (0.2, 0.3) if args.quick else (0.1, 0.15, 0.2, 0.3)
    caps = old_caps(args.old_caps)
    rng = np.random.default_rng(20261207)
    started, cpu = time.perf_counter(), time.process_time()
    before_text = ("point SPRT calibrated to its cap, positions cycled" if args.before == "sprt" else
                   "mixture, futility by one paired bet, positions drawn")
    print(f"{sims} simulated comparisons per setting; alpha {ALPHA}, power {POWER}. before: {before_text}; after: "
          "anytime-valid mixture, futility by the mean of two paired bets, positions drawn. Error = P(either named "
          "better) under A/A; power = P(A named better). +- one Monte Carlo standard error. Fixed n: McNemar at "
          "independent / every-pair-discordant arms; saved: against each.\n")
    print("| d | setting | rates A/B | arms | cap b/a | fixed n ind/worst | error or power before | after | "
          "mean pairs before | after | saved before/after (ind) | after (worst) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    saved: dict[str, list[float]] = {"before": [], "after": [], "worst": []}
    out_of_sample: dict[str, list[float]] = {"before": [], "after": [], "worst": []}
    worst: dict[str, dict[str, float]] = {"before": {"error": 0.0, "power": 1.0}, "after": {"error": 0.0, "power": 1.0}}
    longer = []
    for diff in diffs:
        after_cap = sq.minimum_cap(ALPHA, POWER, diff, 1)
        assert after_cap is not None
        designs = {"before": before_design(args.before, diff, 1, caps),
                   "after": sq.mixture_design(ALPHA, POWER, diff, 1, after_cap)}
        fixed = designs["after"].fixed_sample_pairs()
        fixed_worst = designs["after"].fixed_sample_pairs_worst()
        for setting in settings(diff):
            tallies = one_setting(rng, sims, setting, diff, designs)
            cells = []
            means = {}
            for name, tally in tallies.items():
                value, se = tally.rate((1, -1)) if setting.null else tally.rate(1)
                key = "error" if setting.null else "power"
                worst[name][key] = (max if setting.null else min)(worst[name][key], value)
                cells.append(f"{value:.3f} +- {se:.3f}")
                means[name] = tally.mean()
                saved[name].append(1 - means[name][0] / fixed)
                tuned = diff == 0.2 and setting.dependence in ("independent", "negative") and not setting.null \
                    and abs(setting.p_second - 0.4) < 1e-9
                if not tuned:
                    out_of_sample[name].append(1 - means[name][0] / fixed)
            saved["worst"].append(1 - means["after"][0] / fixed_worst)
            if not tuned:
                out_of_sample["worst"].append(saved["worst"][-1])
            if means["after"][0] > fixed:
                longer.append(f"d {diff} {setting.name} {setting.p_first:.2f}/{setting.p_second:.2f} "
                              f"{setting.dependence}: {means['after'][0]:.1f} pairs against {fixed}"
                              + (f" (and the worst-case fixed n {fixed_worst})" if means["after"][0] > fixed_worst
                                 else f" (under the worst-case fixed n {fixed_worst})"))
            print(f"| {diff} | {setting.name} | {setting.p_first:.2f}/{setting.p_second:.2f} | {setting.dependence} | "
                  f"{designs['before'].cap}/{designs['after'].cap} | {fixed}/{fixed_worst} | {cells[0]} | {cells[1]} | "
                  f"{means['before'][0]:.1f} +- {means['before'][1]:.1f} | {means['after'][0]:.1f} +- "
                  f"{means['after'][1]:.1f} | {100 * saved['before'][-1]:.0f} %/{100 * saved['after'][-1]:.0f} % | "
                  f"{100 * saved['worst'][-1]:.0f} % |", flush=True)
    print(f"\nmean saving against McNemar's fixed n: before {100 * np.mean(saved['before']):.1f} %, after "
          f"{100 * np.mean(saved['after']):.1f} % over all {len(saved['after'])} settings; out of sample (not tuned "
          f"on): before {100 * np.mean(out_of_sample['before']):.1f} %, after "
          f"{100 * np.mean(out_of_sample['after']):.1f} %")
    print(f"mean saving (after) against McNemar's fixed n for every pair discordant (the power it guarantees): "
          f"{100 * np.mean(saved['worst']):.1f} % over all; out of sample "
          f"{100 * np.mean(out_of_sample['worst']):.1f} %")
    for name in ("before", "after"):
        print(f"{name}: highest type I error {worst[name]['error']:.3f}, lowest power {worst[name]['power']:.3f}")
    print("settings where the sequential test (after) uses more pairs on average than the fixed n: "
          + ("; ".join(longer) if longer else "none"))
    three_arms(rng, sims, caps, args.before)
    print(f"\n{time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} s CPU, load average "
          f"{os.getloadavg()[0]:.1f}")


def before_design(before: str, diff: float, comparisons: int,
                  caps: dict[tuple[float, int], int]) -> sq.SequentialDesign:
    if before == "sprt":
        return sq.design(ALPHA, POWER, diff, comparisons, caps[(diff, comparisons)])
    cap = sq.minimum_cap(ALPHA, POWER, diff, comparisons, sq.FutilityRule.PAIRED_BETTING)
    assert cap is not None
    return sq.mixture_design(ALPHA, POWER, diff, comparisons, cap, sq.FutilityRule.PAIRED_BETTING)


def three_arms(rng: np.random.Generator, sims: int, caps: dict[tuple[float, int], int], before: str) -> None:
    """K = 3, every pair declared, d = 0.2: a run lasts until its slowest comparison stops."""
    diff = 0.2
    after_cap = sq.minimum_cap(ALPHA, POWER, diff, 3)
    assert after_cap is not None
    designs = {"before": before_design(before, diff, 3, caps),
               "after": sq.mixture_design(ALPHA, POWER, diff, 3, after_cap)}
    fixed = designs["after"].fixed_sample_pairs()
    print(f"\nThree arms, every pair declared (K = 3, alpha {ALPHA / 3:.4f} each), d {diff}, independent arms; "
          f"fixed n {fixed} pairs per comparison (independent arms; {designs['after'].fixed_sample_pairs_worst()} "
          f"every pair discordant), so {fixed} blocks per run. Saving per comparison (the mean over its "
          "three comparisons) against per run (the slowest of the three), against the independent fixed n.\n")
    print("| rates A/B/C | cap b/a | per comparison before | after | per run before | after |")
    print("|---|---|---|---|---|---|")
    for rates in ((0.5, 0.5, 0.5), (0.8, 0.8, 0.8), (0.6, 0.4, 0.4), (0.7, 0.5, 0.3)):
        cells = {}
        for name, rule in designs.items():
            per_comparison, per_run = [], []
            for start in range(0, sims, CHUNK):
                count = min(CHUNK, sims - start)
                arms = [rng.random((count, rule.cap)) < p for p in rates]
                used = [sq.simulate(rule, arms[i], arms[j], rule.cap)[1] for i, j in ((0, 1), (0, 2), (1, 2))]
                per_comparison.append(np.mean(used, axis=0))
                per_run.append(np.max(used, axis=0))
            comparison_mean = float(np.concatenate(per_comparison).mean())
            run = np.concatenate(per_run)
            cells[name] = (1 - comparison_mean / fixed, 1 - run.mean() / fixed,
                           run.std(ddof=1) / math.sqrt(run.size) / fixed)
        print(f"| {'/'.join(f'{p:.1f}' for p in rates)} | {designs['before'].cap}/{designs['after'].cap} | "
              f"{100 * cells['before'][0]:.0f} % | {100 * cells['after'][0]:.0f} % | "
              f"{100 * cells['before'][1]:.1f} +- {100 * cells['before'][2]:.1f} % | "
              f"{100 * cells['after'][1]:.1f} +- {100 * cells['after'][2]:.1f} % |", flush=True)


if __name__ == "__main__":
    main()
