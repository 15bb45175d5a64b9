"""Where the simulated SO-101's jaws touch the 3 cm cube, in gripper units relative to where they squeeze it.

Why: the anatomy (rules 3, `harness.run.anatomy`) dates a confirmed grasp back to when the jaws reached the cube
and ends it when they leave it, reading only the gripper's position; the judge's grasp clock starts at first
contact of both jaws and its release is the last. How far above the squeezed position the jaws first touch (while
closing) and last touch (while opening) is a property of the jaws, the cube and the contact model, measured here,
not fitted to any policy's attempts: the arm is posed around the cube by the expert's plan, the gripper is closed
and opened at fixed rates, and the judge's own contact test (`Judge.cube_contact_forces`, both jaws above zero) is
read every physics step.

Run: .venv/bin/python benchmarks/gripper_contact_band.py [--quick]
Prints one row per cube yaw, cube offset and rate: the squeezed position (the gripper still at full load after the
judge's 0.25 s) and the bands above it.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import mujoco
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.models.defaults import DEFAULT_START_POSE  # noqa: E402
from harness.models.protocol import JOINT_NAMES, Scene  # noqa: E402
from harness.policies.scripted import plan_pick_and_place  # noqa: E402
from harness.sim.units import from_sim, to_sim  # noqa: E402
from harness.sim.world import SimWorld  # noqa: E402

PREGRASP_STEPS = 72     # the expert's plan: over the cube (1.2 s), down to it (1.0 s), a pause (0.2 s), at 30 Hz


def measure(world: SimWorld, cube_xy: tuple[float, float], yaw_deg: float, misaligned_deg: float, close_rate: float,
            open_rate: float) -> tuple[float, float | None, float | None]:
    """(squeezed position, first both-jaw contact closing, last both-jaw contact opening), gripper units; the
    jaws turned `misaligned_deg` from the cube's faces (a learned policy's wrist is not the expert's)."""
    scene = Scene()
    world.reset(cube_xy, math.radians(yaw_deg), DEFAULT_START_POSE)
    start = np.array([to_sim(n, DEFAULT_START_POSE[n]) for n in JOINT_NAMES])
    pos, yaw = world.cube_pose()
    bowl = (scene.bowl_xy_cm[0] / 100, scene.bowl_xy_cm[1] / 100)
    plan = plan_pick_and_place(world.model, 30, start, pos, yaw + math.radians(misaligned_deg), bowl)
    for target in plan[:PREGRASP_STEPS]:
        world.step_control(target)
    arm = plan[PREGRASP_STEPS - 1][:5]

    def gripper() -> float:
        return from_sim("gripper", float(world.joint_positions_rad()[5]))

    def both_jaws() -> bool:
        fixed, moving, _ = world.judge.cube_contact_forces(world.data)
        return fixed > 0 and moving > 0

    def control_step(command: float, each: list[float | None], first: bool) -> None:
        world.data.ctrl[:] = np.append(arm, to_sim("gripper", command))
        for _ in range(world.substeps):
            mujoco.mj_step(world.model, world.data)
            if both_jaws() and (each[0] is None or not first):
                each[0] = gripper()

    command, touched = gripper(), [None]
    while command > 0:
        command = max(0.0, command - close_rate)
        control_step(command, touched, first=True)
    for _ in range(8):            # the judge's 0.25 s at full load
        control_step(0.0, touched, first=True)
    squeezed = gripper()
    command, last = squeezed, [None]
    while command < squeezed + 10:
        command += open_rate
        control_step(command, last, first=False)
    return squeezed, touched[0], last[0]


def _signed(value: float | None) -> str:
    return "never" if value is None else f"{value:+.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one cube place and yaw")
    args = parser.parse_args()
    trained = Scene().trained_cube_xy_cm
    places = [(0.0, 0.0)] if args.quick else [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (-1.0, -1.0)]
    yaws = [0.0] if args.quick else [0.0, 30.0]
    turns = [0.0] if args.quick else [0.0, 10.0, 20.0]
    rates = [0.1, 0.3, 1.0]
    world = SimWorld()
    began = time.perf_counter()
    print("| cube offset (cm) | cube yaw (deg) | jaws turned (deg) | rate (units/step) | squeezed | "
          "first contact closing | last contact opening |")
    print("|---|---|---|---|---|---|---|")
    closing, opening = [], []
    for dx, dy in places:
        for yaw, turn, rate in ((y, u, r) for y in yaws for u in turns for r in rates):
            xy = ((trained[0] + dx) / 100, (trained[1] + dy) / 100)
            squeezed, touched, last = measure(world, xy, yaw, turn, rate, rate)
            up = None if touched is None else touched - squeezed
            down = None if last is None else last - squeezed
            closing += [up] if up is not None else []
            opening += [down] if down is not None else []
            print(f"| {dx:+.0f}, {dy:+.0f} | {yaw:.0f} | {turn:.0f} | {rate} | {squeezed:.2f} | {_signed(up)} | "
                  f"{_signed(down)} |")
    print()
    print(f"first both-jaw contact while closing: {min(closing):+.2f} to {max(closing):+.2f} units above the squeeze "
          f"(median {np.median(closing):+.2f}); last while opening: {min(opening):+.2f} to {max(opening):+.2f} "
          f"(median {np.median(opening):+.2f}); {len(closing)} closes, {time.perf_counter() - began:.0f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
