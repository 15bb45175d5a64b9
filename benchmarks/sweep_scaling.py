"""A learned-policy sweep's predicted wall time (issue 42): `harness.app.parallel.scaling.predicted_sweep_s` fed with
this machine's measured costs.

Measured here, in this process: one checkpoint's load (`LeRobotPolicy`) and one scene build (`SimWorld`), wall
and CPU. From `benchmarks/floor_bench.py --json` files: a trial's wall and CPU per control step (before and
after), times the steps a trial runs. Prints the 4-checkpoint x 30-trial sweep before/after and the
10-checkpoint x 50-trial sweep on 2, 8, 32 and 64 cores and a 64-core Ray cluster.
Run: .venv/bin/python benchmarks/sweep_scaling.py --policy CKPT --before B.json --after A.json [--steps 600]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from harness.app.parallel.scaling import SweepCosts, TrialCosts, best_sweep_workers, predicted_sweep_s


def measured_loads(policy: str) -> tuple[float, float]:
    """(checkpoint load, scene build), CPU seconds (the figures on a free core)."""
    from harness.policies.lerobot_policy import LeRobotPolicy
    from harness.sim.world import SimWorld

    LeRobotPolicy(policy, task="t", device="cpu").close()   # imports and first-load costs outside the timing
    c0 = time.process_time()
    LeRobotPolicy(policy, task="t", device="cpu").close()
    load = time.process_time() - c0
    c0 = time.process_time()
    world = SimWorld()
    world.render("top", 96, 72)
    world.render("wrist", 96, 72)
    build = time.process_time() - c0
    world.close()
    return load, build


def trial_costs(bench: dict, steps: int) -> TrialCosts:
    """A trial on a free core: its CPU per step is its wall per step there (the loop is serial, one core)."""
    cpu_s = bench["trial_cpu_ms"] * steps / 1000
    return TrialCosts(wall_s=cpu_s, cpu_s=cpu_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", required=True)
    parser.add_argument("--before", required=True, type=Path)
    parser.add_argument("--after", required=True, type=Path)
    parser.add_argument("--steps", type=int, default=600, help="control steps a trial runs (600: a 20 s failure)")
    args = parser.parse_args()
    load, build = measured_loads(args.policy)
    before = trial_costs(json.loads(args.before.read_text()), args.steps)
    after = trial_costs(json.loads(args.after.read_text()), args.steps)
    print(f"checkpoint load {load:.1f} s CPU, scene build {build:.1f} s CPU; trial ({args.steps} steps) before "
          f"{before.cpu_s:.1f} s, after {after.cpu_s:.1f} s CPU; load {os.getloadavg()[0]:.1f}")
    old = SweepCosts(before, policy_load_s=load, scene_build_s=build)
    new = SweepCosts(after, policy_load_s=load, scene_build_s=build)
    b = predicted_sweep_s(4, 30, 1, 2, old, kept=False)
    a = predicted_sweep_s(4, 30, 1, 2, new, kept=True)
    print("\n| 4 checkpoints x 30 trials, serial, 2 cores | predicted wall |\n|---|---:|")
    print(f"| before (each cell loads and builds afresh, full-mesh frames) | {b / 60:.1f} min |")
    print(f"| after (kept simulator, sized-v1 frames) | {a / 60:.1f} min |")
    print(f"| speed-up | {b / a:.2f}x |")
    print("\n| 10 checkpoints x 50 trials (after) | workers per cell | predicted wall |\n|---|---:|---:|")
    for cores in (2, 8, 32, 64):
        w, t = best_sweep_workers(10, 50, cores, new)
        print(f"| {cores} cores, one machine | {w} | {t / 60:.1f} min |")
    w, t = best_sweep_workers(10, 50, 64, new, cluster=True)
    print(f"| Ray cluster, 64 cores in all (runtime up already) | {w} | {t / 60:.1f} min |")
    print(f"| (1 worker, 2 cores: {predicted_sweep_s(10, 50, 1, 2, new) / 60:.1f} min; 2 workers: "
          f"{predicted_sweep_s(10, 50, 2, 2, new) / 60:.1f} min) | | |")


if __name__ == "__main__":
    main()
