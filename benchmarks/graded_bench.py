"""Graded outcomes against success alone, on outcomes the harness has really seen (issue 58, item 2).

Every scored attempt of the committed learned-policy scoresheets (and the built-ins' runs under results/graded/)
is read once: its success, its progress (0-4, `harness.models.graded`, from the judge) and its time to success. Per
pair of policies, 10,000 blind comparisons are resampled: each block draws one attempt of each policy at random
from its pool (the pools come from different protocols, so the arms are independent here; the test does not need
them to be). Each comparison runs, on the same draws:

* success: the comparison's discordant-pair test (`harness.stats.sequential`, calibrated cap);
* progress and time_to_success: the paired betting test (`harness.stats.betting`, Ville's bound);

all at alpha 0.05, power 0.8, min_difference 0.2 (on each outcome's [0, 1] scale), cap 176 pairs. Against them,
McNemar's fixed-sample test on success at the same alpha and power for the pair's own success rates (Connor's n,
independent trials): what a fixed-n binary comparison of these two policies would need. A/A rows (a policy against
itself) give the type I error. Operator minutes: trials times the measured operator time per trial on the
emulated arm (`--operator-s`, default 85 s: the reference ACT's 24-trial rehearsal, 2,041 s, docs/benchmarks.md
"Twin fidelity"; place the cube, watch 15 s, score, reset).

    .venv/bin/python benchmarks/graded_bench.py [--comparisons 10000] [--seed 58]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.models.graded import GradedOutcome, PrimaryOutcome  # noqa: E402
from harness.models.protocol import Scene  # noqa: E402
from harness.models.scoresheet import load_scoresheet  # noqa: E402
from harness.models.taxonomy import Label  # noqa: E402
from harness.stats import betting, sequential  # noqa: E402

ALPHA, POWER, DIFFERENCE, CAP = 0.05, 0.8, 0.2, 176
LIMIT_S = 20.0   # every committed protocol's episode_time_limit_s (results/*/protocols, results/anatomy/*.yaml)

# the committed sheets, by policy (docs/results.md, docs/benchmarks.md "Failure anatomy", "coverage", "latency")
POLICIES: dict[str, list[str]] = {
    "ACT step 500": ["results/anatomy/scoresheets/ref-act-500-*.yaml", "results/anatomy/scoresheets/act500-*.yaml",
                     "results/reference/scoresheets/act-fixed-curve/*step500*.yaml"],
    "ACT step 1000": ["results/anatomy/scoresheets/ref-act-1000-*.yaml",
                      "results/anatomy/scoresheets/act1000-*.yaml",
                      "results/reference/scoresheets/final/*.yaml",
                      "results/reference/scoresheets/act-fixed-curve/*step1000*.yaml"],
    "ACT fixed data (last)": ["results/coverage/scoresheets/fixed*.yaml"],
    "ACT scattered data": ["results/coverage/scoresheets/scattered*.yaml",
                           "results/coverage/rerun-session31/scattered.yaml"],
    "tiny SmolVLA": ["results/anatomy/scoresheets/*smolvla*.yaml"],
    "expert": ["results/graded/scoresheets/*expert*.yaml"],
    "replay": ["results/graded/scoresheets/*replay*.yaml"],
}


@dataclass(frozen=True)
class Pool:
    name: str
    success: np.ndarray
    progress: np.ndarray   # on [0, 1]
    time: np.ndarray       # 1 - t / limit on [0, 1], 0 for a failure


def load_pool(name: str, patterns: list[str]) -> Pool | None:
    scene = Scene()
    success, progress, times = [], [], []
    for pattern in patterns:
        for path in sorted(REPO.glob(pattern)):
            if path.name.endswith(".chain"):
                continue
            sheet = load_scoresheet(path)
            attempts = [a for a in sheet.scored_attempts() if a.judge is not None]
            fps = max((a.loop.target_fps for a in attempts), default=30.0) or 30.0
            limit = LIMIT_S
            outcome = GradedOutcome.declare(PrimaryOutcome.PROGRESS, True, scene.bowl_xy_cm, scene.bowl_diameter_cm,
                                            scene.trained_cube_xy_cm, limit)
            timed = outcome.model_copy(update={"kind": PrimaryOutcome.TIME_TO_SUCCESS})
            for a in attempts:
                episode = a.loop.episode_s if a.loop.episode_s is not None else a.loop.steps / fps
                success.append(a.label is Label.SUCCESS)
                progress.append(outcome.score(a.label, a.judge, a.anatomy, episode))
                times.append(timed.score(a.label, a.judge, a.anatomy, episode))
    if not success:
        return None
    return Pool(name, np.array(success, dtype=float), np.array(progress), np.array(times))


def resample(rng: np.random.Generator, pool: Pool, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pick = rng.integers(0, len(pool.success), size=(count, CAP))
    return pool.success[pick], pool.progress[pick], pool.time[pick]


def fixed_binary(p_first: float, p_second: float) -> int | None:
    if abs(p_first - p_second) < 1e-9:
        return None
    return sequential.mcnemar_fixed_pairs(ALPHA, POWER, p_first, p_second)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comparisons", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=58)
    parser.add_argument("--operator-s", type=float, default=85.0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    pools = [p for name, patterns in POLICIES.items() if (p := load_pool(name, patterns)) is not None]
    print("pools (scored attempts; success, mean progress of 4, mean time score):")
    for p in pools:
        print(f"  {p.name:<24} {len(p.success):>4}  {p.success.mean():.2f}  {4 * p.progress.mean():.2f}  "
              f"{p.time.mean():.3f}")
    binary = sequential.design(ALPHA, POWER, DIFFERENCE, 1, CAP)
    graded = betting.BettingDesign(ALPHA, POWER, DIFFERENCE, 1, CAP)
    print(f"\n{args.comparisons} comparisons per pair; alpha {ALPHA}, power {POWER}, min_difference {DIFFERENCE}, "
          f"cap {CAP}; operator {args.operator_s:g} s a trial\n")
    declared = 2 * binary.fixed_sample_pairs()
    print(f"fixed-n binary for the declared difference (McNemar, least favourable rates, what the report compares "
          f"against): {declared} trials; for the pair's own success rates: the column 'fixed-n, true rates'\n")
    header = ("| A | B | P(success) A / B | mean progress A / B | fixed-n, true rates | outcome | right | wrong | "
              "futility | cap | trials mean | p95 | vs fixed-n declared | vs fixed-n true rates | operator min |")
    print(header)
    print("|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    summary: dict[str, list[tuple[float, float, float | None]]] = {}
    worst_aa: dict[str, float] = {}
    started = time.perf_counter()
    pairs = [(a, b) for i, a in enumerate(pools) for b in pools[i:]]
    for first, second in pairs:
        s1, g1, t1 = resample(rng, first, args.comparisons)
        s2, g2, t2 = resample(rng, second, args.comparisons)
        p1, p2 = first.success.mean(), second.success.mean()
        m1, m2 = first.progress.mean(), second.progress.mean()
        fixed = fixed_binary(p1, p2) if first is not second else None
        fixed_trials = 2 * fixed if fixed is not None else None
        runs = {"success": sequential.simulate(binary, s1.astype(bool), s2.astype(bool), CAP),
                "progress": betting.simulate(graded, g1, g2),
                "time_to_success": betting.simulate(graded, t1, t2)}
        for kind, (code, used) in runs.items():
            if kind == "success":   # sequential.simulate: 1 first, -1 second, 0 futility, 2 cap
                first_wins, second_wins, futile, capped = code == 1, code == -1, code == 0, code == 2
            else:
                first_wins, second_wins = code == betting.FIRST, code == betting.SECOND
                futile, capped = code == betting.FUTILE, code == betting.CAPPED
            truth = {"success": p1 - p2, "progress": m1 - m2,
                     "time_to_success": first.time.mean() - second.time.mean()}[kind]
            if first is second:
                right, wrong = 0.0, float((first_wins | second_wins).mean())
            else:
                right = float((first_wins if truth > 0 else second_wins).mean())
                wrong = float((second_wins if truth > 0 else first_wins).mean())
            trials = 2 * used
            saving = f"{100 * (1 - trials.mean() / fixed_trials):+.0f} %" if fixed_trials else "-"
            if first is second:
                worst_aa[kind] = max(worst_aa.get(kind, 0.0), wrong)
            else:
                summary.setdefault(kind, []).append((float(trials.mean()), right, fixed_trials))
            print(f"| {first.name} | {second.name} | {p1:.2f} / {p2:.2f} | {4 * m1:.2f} / {4 * m2:.2f} | "
                  f"{fixed_trials or '-'} | {kind} | {right:.3f} | {wrong:.4f} | {futile.mean():.3f} | "
                  f"{capped.mean():.3f} | {trials.mean():.1f} | {np.percentile(trials, 95):.0f} | "
                  f"{100 * (1 - trials.mean() / declared):+.0f} % | {saving} | "
                  f"{trials.mean() * args.operator_s / 60:.0f} |")
    print("\nover the pairs that differ (means of the per-pair figures):")
    for kind, rows in summary.items():
        mean_trials = np.mean([t for t, _, _ in rows])
        oracle = [1 - t / f for t, _, f in rows if f]
        print(f"  {kind:<16} trials {mean_trials:6.1f} ({100 * (1 - mean_trials / declared):.0f} % fewer than the "
              f"declared fixed-n {declared}; {100 * np.mean(oracle):+.0f} % against each pair's own fixed-n, "
              f"mean); right decision {np.mean([r for _, r, _ in rows]):.3f}; A/A error at most "
              f"{worst_aa.get(kind, 0.0):.4f}")
    se = math.sqrt(ALPHA * (1 - ALPHA) / args.comparisons)
    print(f"\nMonte Carlo standard error of an error rate near alpha: {se:.4f}; of a rate p: sqrt(p (1 - p) / "
          f"{args.comparisons}). {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
