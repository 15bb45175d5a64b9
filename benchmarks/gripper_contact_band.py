"""Where the simulated SO-101's jaws touch the 3 cm cube, in gripper units relative to where they squeeze it.

Why: the anatomy (rules 3, `harness.run.anatomy`) dates a confirmed grasp back to when the jaws reached the cube
and ends it when they leave it, reading only the gripper's position; the judge's grasp clock starts at first
contact of both jaws and its release is the last. How far above the squeezed position the jaws first touch (while
closing) and last touch (while opening) is a property of the jaws, the cube and the contact model, measured here,
not fitted to any policy's attempts: the arm is posed around the cube by the expert's plan, the gripper is closed
and opened at fixed rates, and the judge's own contact test (`Judge.cube_contact_forces`, both jaws above zero) is
read every physics step.

`--plays` then checks the anatomy built on these bands (rules 3) against the judge on scripted closes that no
constant was set on: the expert's pick, its gripper brought down at once or over 0.2 s to a resting command
(18.5-21 units), held there 0.1 or 0.33 s, then closed hard; one row per resting command, the grasp within one
control step or not.

Run: .venv/bin/python benchmarks/gripper_contact_band.py [--quick] [--plays]
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
from harness.run.anatomy import GraspPoints, anatomy_from_rows  # noqa: E402
from harness.sim.units import GRIPPER_LOAD_KEY, from_sim, to_sim  # noqa: E402
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


def slow_close(world: SimWorld, fk: GraspPoints, offset_cm: tuple[float, float], resting: float, rest_steps: int,
               ramp_steps: int) -> tuple[float | None, float | None]:
    """(the judge's grasp, the anatomy's grasp) in episode seconds for one scripted slow close; None: not seen."""
    scene = Scene()
    trained = scene.trained_cube_xy_cm
    world.reset(((trained[0] + offset_cm[0]) / 100, (trained[1] + offset_cm[1]) / 100), 0.0, DEFAULT_START_POSE,
                seed=7)
    start = np.array([to_sim(n, DEFAULT_START_POSE[n]) for n in JOINT_NAMES])
    pos, yaw = world.cube_pose()
    plan = plan_pick_and_place(world.model, 30, start, pos, yaw, (scene.bowl_xy_cm[0] / 100, scene.bowl_xy_cm[1] / 100))
    grip = np.array([q[5] for q in plan])
    opened = int(np.argmax(grip))
    close = opened + int(np.flatnonzero(grip[opened:] < grip[opened] - 1e-6)[0])
    shut = close + int(np.argmin(grip[close:]))
    arm, wide, rest = plan[close - 1][:5], plan[close - 1][5], to_sim("gripper", resting)
    down = [np.append(arm, wide + (rest - wide) * (k + 1) / ramp_steps) for k in range(ramp_steps)]
    held = [np.append(arm, rest) for _ in range(rest_steps)]
    squeeze = [np.append(q[:5], min(q[5], rest)) for q in plan[close:shut]]
    plan = plan[:close] + down + held + squeeze + plan[shut:]
    rows, began = [], world.time
    for target in plan[:close + ramp_steps + rest_steps + 45]:
        q = world.joint_positions_rad()
        row = {"t": world.time - began, f"obs.{GRIPPER_LOAD_KEY}": float(world.servo_loads()[-1]),
               "action.gripper.pos": from_sim("gripper", float(target[5]))}
        row.update({f"obs.{n}.pos": from_sim(n, float(v)) for n, v in zip(JOINT_NAMES, q, strict=True)})
        rows.append(row)
        world.step_control(target)
    judged = next((e.t for e in world.judge.state.events if e.event == "grasp"), None)
    anatomy = anatomy_from_rows(rows, fk, trained, offset_cm, scene.bowl_xy_cm, 5.0)
    return judged, anatomy.closed_at_s if anatomy is not None and anatomy.holding else None


def plays(world: SimWorld) -> None:
    fk = GraspPoints()
    offsets = [(0.0, 0.0), (3.0, -2.0), (-2.0, 2.0), (1.0, 1.0)]
    print()
    print("| resting command (units) | grasp within one control step | anatomy minus judge (ms) |")
    print("|---|---|---|")
    total = agreed = 0
    for resting in (18.5, 19.0, 19.5, 20.0, 20.5, 21.0):
        deltas, ok = [], 0
        for offset in offsets:
            for rest_steps in (3, 10):
                for ramp_steps in (1, 6):
                    judged, seen = slow_close(world, fk, offset, resting, rest_steps, ramp_steps)
                    if judged is not None and seen is not None:
                        deltas.append(1000 * (seen - judged))
                        ok += abs(seen - judged) <= 1 / 30 + 1e-3
        n = len(offsets) * 4
        total, agreed = total + n, agreed + ok
        spread = f"{min(deltas):+.0f} to {max(deltas):+.0f}" if deltas else "n/a"
        print(f"| {resting} | {ok}/{n} | {spread} |")
    print(f"\nslow closes: {agreed}/{total} grasps within one control step of the judge")


def _signed(value: float | None) -> str:
    return "never" if value is None else f"{value:+.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one cube place and yaw")
    parser.add_argument("--plays", action="store_true", help="also the scripted slow closes against the judge")
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
    if args.plays:
        plays(world)
    return 0


if __name__ == "__main__":
    sys.exit(main())
