"""Simulator speed and the built-in policies' success over the randomized protocol.

Run: .venv/bin/python benchmarks/sim_bench.py [--quick]
Prints Markdown tables (paste into docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import harness.sim  # noqa: F401  (selects the GL backend; must precede mujoco)

# isort: split
import mujoco
import numpy as np

from harness.models.protocol import JOINT_NAMES, load_protocol
from harness.policies.base import TrialContext
from harness.policies.scripted import ExpertPolicy, ReplayPolicy
from harness.run.stages import SimStage
from harness.sim.scene import build_model
from harness.sim.units import to_sim
from harness.sim.world import SimWorld

REPO = Path(__file__).resolve().parents[1]


def physics_steps_per_s(model: mujoco.MjModel, seconds: float = 2.0) -> float:
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        mujoco.mj_step(model, data)
        n += 1
    return n / (time.perf_counter() - t0)


def ms_per_frame(model: mujoco.MjModel, camera: str, width: int, height: int, frames: int = 20) -> float:
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    renderer = mujoco.Renderer(model, height, width)
    renderer.update_scene(data, camera=camera)
    renderer.render()
    t0 = time.perf_counter()
    for _ in range(frames):
        renderer.update_scene(data, camera=camera)
        renderer.render()
    elapsed = (time.perf_counter() - t0) / frames * 1000
    renderer.close()
    return elapsed


def run_trial(world: SimWorld, protocol, policy, trial, cameras: tuple[str, ...] = ()) -> tuple[dict, int]:
    world.set_arm(protocol.start_pose)
    SimStage(world, protocol).place_cube(trial, attempt=1)
    policy.reset(TrialContext(protocol, trial, world))
    steps = 0
    for _ in range(round(protocol.episode_time_limit_s * protocol.fps)):
        for cam in cameras:
            world.render(cam, 640, 480)
        action = policy.select_action({})
        world.step_control(np.array([to_sim(n, action[f"{n}.pos"]) for n in JOINT_NAMES]))
        steps += 1
        if world.judge.finished:
            break
    return world.judge.verdict(world.data), steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="10 trials per policy instead of 50")
    args = parser.parse_args()
    protocol = load_protocol(REPO / "protocols" / "randomized.yaml")
    fast, default = build_model(fast_meshes=True), build_model(fast_meshes=False)
    print(f"MUJOCO_GL={os.environ['MUJOCO_GL']}, mujoco {mujoco.__version__}, {os.cpu_count()} CPUs\n")

    print("| physics (dt 1/300 s) | steps/s | real-time factor |\n|---|---|---|")
    rate = physics_steps_per_s(fast)
    print(f"| arm holding still | {rate:,.0f} | {rate / 300:.0f}x |")
    world = SimWorld()
    t0, steps = time.perf_counter(), 0
    verdict, steps = run_trial(world, protocol, ExpertPolicy(), protocol.trials[0])
    per_step = (time.perf_counter() - t0) / steps
    print(f"| expert pick-and-place (incl. planning, judge) | {world.substeps / per_step:,.0f} | "
          f"{1 / 30 / per_step:.0f}x |\n")

    print("| camera | resolution | ms/frame, shadows+MSAA off | ms/frame, + decimated meshes |\n|---|---|---|---|")
    for camera in ("top", "wrist_cam"):
        for width, height in ((640, 480), (320, 240)):
            print(f"| {camera} | {width}x{height} | {ms_per_frame(default, camera, width, height):.1f} | "
                  f"{ms_per_frame(fast, camera, width, height):.1f} |")

    t0 = time.perf_counter()
    _, steps = run_trial(world, protocol, ExpertPolicy(), protocol.trials[1], cameras=("top", "wrist"))
    rate = steps / (time.perf_counter() - t0)
    print(f"\nControl loop with both cameras at 640x480 (lock-step): {rate:.1f} steps/s "
          f"({rate / 30:.2f}x real time at 30 Hz)\n")

    trials = protocol.trials[:10] if args.quick else protocol.trials
    print("| policy | success over the randomized protocol | by distance from the trained position |\n|---|---|---|")
    for policy in (ExpertPolicy(), ReplayPolicy()):
        bins: dict[str, list[int]] = {"0-2 cm": [], "2-4 cm": [], "4-6 cm": []}
        t0 = time.perf_counter()
        for trial in trials:
            verdict, _ = run_trial(world, protocol, policy, trial)
            d = math.hypot(trial.dx_cm, trial.dy_cm)
            key = "0-2 cm" if d < 2 else "2-4 cm" if d < 4 else "4-6 cm"
            bins[key].append(verdict["label"] == "success")
        k = sum(sum(v) for v in bins.values())
        by = ", ".join(f"{b}: {sum(v)}/{len(v)}" for b, v in bins.items())
        print(f"| {policy.name} | {k}/{len(trials)} ({time.perf_counter() - t0:.0f} s) | {by} |")
    world.close()


if __name__ == "__main__":
    main()
