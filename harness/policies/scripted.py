"""Built-in policies: a scripted expert that reads the true cube pose, and `replay`,
which plays the expert's plan for the trained cube position open loop.

The pair shows why randomized protocols exist: replay is what a policy that
memorised one arm motion does, and it looks perfect at offset zero.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from harness.models.protocol import JOINT_NAMES
from harness.policies.base import TrialContext
from harness.sim.kinematics import TopDownIK
from harness.sim.units import GRIPPER_CLOSED_RAD, from_sim, to_sim

GRIPPER_OPEN_RAD = 0.9
APPROACH_HEIGHT = 0.06
CARRY_HEIGHT = 0.09
RELEASE_HEIGHT = 0.08


def _smooth(n: int) -> np.ndarray:
    s = np.linspace(0.0, 1.0, n + 1)[1:]
    return s * s * (3 - 2 * s)


class PickPlacePlanner:
    """Plans a whole pick-and-place as one joint-target per control step."""

    def __init__(self, model: Any, fps: int) -> None:
        self.ik = TopDownIK(model)
        self.fps = fps

    def steps(self, seconds: float) -> int:
        return max(1, round(seconds * self.fps))

    def plan(self, start: np.ndarray, cube_pos: np.ndarray, cube_yaw: float,
             bowl_xy: tuple[float, float]) -> list[np.ndarray]:
        traj: list[np.ndarray] = []
        arm, grip = start[:5].copy(), float(start[5])

        def joint_move(target_arm: np.ndarray, target_grip: float, seconds: float) -> None:
            nonlocal arm, grip
            for s in _smooth(self.steps(seconds)):
                traj.append(np.append(arm + s * (target_arm - arm), grip + s * (target_grip - grip)))
            arm, grip = target_arm.copy(), target_grip

        def cartesian_move(xy: tuple[float, float], z0: float, z1: float, seconds: float,
                           rotation: np.ndarray) -> None:
            nonlocal arm
            for s in _smooth(self.steps(seconds)):
                target = np.array([xy[0], xy[1], z0 + s * (z1 - z0)])
                arm, _ = self.ik.solve_reachable(target, rotation, arm, iterations=30)
                traj.append(np.append(arm, grip))

        def hold(seconds: float) -> None:
            traj.extend(np.append(arm, grip) for _ in range(self.steps(seconds)))

        cx, cy, cz = (float(v) for v in cube_pos)
        seed = np.array([math.atan2(-cy, cx), 0.0, 0.5, 1.0, 0.0])
        rot_pick = self.ik.target_rotation(cube_yaw, seed)
        pre, _ = self.ik.solve_reachable(np.array([cx, cy, cz + APPROACH_HEIGHT]), rot_pick, seed)
        joint_move(pre, GRIPPER_OPEN_RAD, 1.2)
        cartesian_move((cx, cy), cz + APPROACH_HEIGHT, cz, 1.0, rot_pick)
        hold(0.2)
        joint_move(arm, GRIPPER_CLOSED_RAD, 0.5)
        hold(0.3)
        cartesian_move((cx, cy), cz, cz + CARRY_HEIGHT, 1.0, rot_pick)
        bx, by = bowl_xy
        rot_place = self.ik.target_rotation(0.0, np.array([math.atan2(-by, bx), *arm[1:]]))
        over_bowl, _ = self.ik.solve_reachable(np.array([bx, by, CARRY_HEIGHT + 0.015]), rot_place, arm)
        joint_move(over_bowl, grip, 1.5)
        cartesian_move((bx, by), CARRY_HEIGHT + 0.015, RELEASE_HEIGHT, 0.4, rot_place)
        joint_move(arm, GRIPPER_OPEN_RAD, 0.4)
        hold(0.3)
        cartesian_move((bx, by), RELEASE_HEIGHT, RELEASE_HEIGHT + 0.04, 0.5, rot_place)
        joint_move(start[:5].copy(), GRIPPER_OPEN_RAD, 1.5)
        return traj


def _as_action(q: np.ndarray) -> dict[str, float]:
    return {f"{name}.pos": from_sim(name, float(v)) for name, v in zip(JOINT_NAMES, q, strict=True)}


class _PlannedPolicy:
    """Plays a plan made at reset; after it ends, holds the last target."""

    name = "planned"
    camera_keys: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._plan: list[np.ndarray] = []
        self._step = 0

    def _cube_for_plan(self, context: TrialContext) -> tuple[np.ndarray, float]:
        raise NotImplementedError

    def reset(self, context: TrialContext) -> None:
        world = context.world
        if world is None:
            raise RuntimeError(f"the built-in '{self.name}' policy reads the simulator and runs only with --robot sim")
        planner = PickPlacePlanner(world.model, context.protocol.fps)
        start = np.array([to_sim(n, context.protocol.start_pose[n]) for n in JOINT_NAMES])
        cube_pos, cube_yaw = self._cube_for_plan(context)
        self._plan = planner.plan(start, cube_pos, cube_yaw, world.geometry.bowl_xy)
        self._step = 0

    def select_action(self, observation: dict[str, Any]) -> dict[str, float]:
        q = self._plan[min(self._step, len(self._plan) - 1)]
        self._step += 1
        return _as_action(q)

    def close(self) -> None:
        self._plan = []


class ExpertPolicy(_PlannedPolicy):
    """Plans from the true cube pose, as a motion planner with perfect perception would."""

    name = "expert"

    def _cube_for_plan(self, context: TrialContext) -> tuple[np.ndarray, float]:
        return context.world.cube_pose()


class ReplayPolicy(_PlannedPolicy):
    """Plays the expert's plan for the trained cube position, whatever the offset."""

    name = "replay"

    def _cube_for_plan(self, context: TrialContext) -> tuple[np.ndarray, float]:
        world = context.world
        x, y = (v / 100 for v in context.protocol.scene.trained_cube_xy_cm)
        return np.array([x, y, world.judge.rest_z]), 0.0
