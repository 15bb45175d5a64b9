"""Built-in policies: a scripted expert that reads the true cube pose, and `replay`,
which plays the expert's plan for the trained cube position open loop.

The pair shows why randomized protocols exist: replay is what a policy that
memorised one arm motion does, and it looks perfect at offset zero.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from harness.models.protocol import JOINT_NAMES
from harness.models.run_settings import BuiltinPolicy
from harness.policies.base import BasePolicy, TrialContext
from harness.sim.kinematics import TopDownIK
from harness.sim.units import GRIPPER_CLOSED_RAD, from_sim, to_sim

# The expert's opening for approach and release: wide enough for the 3 cm cube, and not the
# joint's full range (that is `harness.sim.units.GRIPPER_OPEN_RAD`).
GRIPPER_PREGRASP_RAD = 0.9
APPROACH_HEIGHT = 0.06
CARRY_HEIGHT = 0.09
RELEASE_HEIGHT = 0.08


def _smooth(n: int) -> np.ndarray:
    s = np.linspace(0.0, 1.0, n + 1)[1:]
    return s * s * (3 - 2 * s)


class TrajectoryBuilder:
    """Joint-target trajectories built from moves a person would name: move, descend, close, open.

    The expert's plan and the judge's test scenarios are both written with it.
    """

    def __init__(self, model: Any, fps: int, start: np.ndarray) -> None:
        self.ik = TopDownIK(model)
        self.fps = fps
        self.arm = np.asarray(start[:5], dtype=float).copy()
        self.grip = float(start[5])
        self.targets: list[np.ndarray] = []

    def _steps(self, seconds: float) -> int:
        return max(1, round(seconds * self.fps))

    def joint_move(self, arm: np.ndarray, grip: float, seconds: float) -> TrajectoryBuilder:
        for s in _smooth(self._steps(seconds)):
            self.targets.append(np.append(self.arm + s * (arm - self.arm), self.grip + s * (grip - self.grip)))
        self.arm, self.grip = np.asarray(arm, dtype=float).copy(), grip
        return self

    def solve(self, xyz: tuple[float, float, float], yaw: float = 0.0) -> np.ndarray:
        rotation = self.ik.target_rotation(yaw, self.arm)
        arm, _ = self.ik.solve_reachable(np.array(xyz), rotation, self.arm)
        return arm

    def move_over(self, xyz: tuple[float, float, float], yaw: float, seconds: float,
                  grip: float | None = None) -> TrajectoryBuilder:
        """Joint-space move to a top-down pose above a point (for travel, not for contact)."""
        seed = np.array([math.atan2(-xyz[1], xyz[0]), *self.arm[1:]])
        rotation = self.ik.target_rotation(yaw, seed)
        arm, _ = self.ik.solve_reachable(np.array(xyz), rotation, seed)
        return self.joint_move(arm, self.grip if grip is None else grip, seconds)

    def straight_line(self, xy: tuple[float, float], z: float, seconds: float, yaw: float = 0.0,
                      to_xy: tuple[float, float] | None = None) -> TrajectoryBuilder:
        """Cartesian move of the grasp point from its present place to (to_xy or xy, z)."""
        rotation = self.ik.target_rotation(yaw, self.arm)
        here = self.ik.grasp_point(self.arm)
        goal = np.array([*(to_xy or xy), z])
        for s in _smooth(self._steps(seconds)):
            self.arm, _ = self.ik.solve_reachable(here + s * (goal - here), rotation, self.arm, iterations=30)
            self.targets.append(np.append(self.arm, self.grip))
        return self

    def gripper(self, grip: float, seconds: float) -> TrajectoryBuilder:
        return self.joint_move(self.arm, grip, seconds)

    def hold(self, seconds: float) -> TrajectoryBuilder:
        self.targets.extend(np.append(self.arm, self.grip) for _ in range(self._steps(seconds)))
        return self


def plan_pick_and_place(model: Any, fps: int, start: np.ndarray, cube_pos: np.ndarray, cube_yaw: float,
                        bowl_xy: tuple[float, float]) -> list[np.ndarray]:
    """Approach from above, grasp, lift, carry over the bowl, release, withdraw, go home."""
    cx, cy, cz = (float(v) for v in cube_pos)
    bx, by = bowl_xy
    b = TrajectoryBuilder(model, fps, start)
    b.move_over((cx, cy, cz + APPROACH_HEIGHT), cube_yaw, 1.2, grip=GRIPPER_PREGRASP_RAD)
    b.straight_line((cx, cy), cz, 1.0, cube_yaw).hold(0.2)
    b.gripper(GRIPPER_CLOSED_RAD, 0.5).hold(0.3)
    b.straight_line((cx, cy), cz + CARRY_HEIGHT, 1.0, cube_yaw)
    b.move_over((bx, by, CARRY_HEIGHT + 0.015), 0.0, 1.5)
    b.straight_line((bx, by), RELEASE_HEIGHT, 0.4)
    b.gripper(GRIPPER_PREGRASP_RAD, 0.4).hold(0.3)
    b.straight_line((bx, by), RELEASE_HEIGHT + 0.04, 0.5)
    b.joint_move(np.asarray(start[:5], dtype=float), GRIPPER_PREGRASP_RAD, 1.5)
    return b.targets


PLANNER_VERSION = 1  # bump when plan_pick_and_place or the IK changes what it returns


def _model_digest(model: Any) -> str:
    """What the plan depends on in the model: kinematic tree, joint ranges and the grasp site."""
    h = hashlib.sha256()
    for array in (model.body_pos, model.body_quat, model.jnt_range, model.jnt_axis, model.site_pos, model.site_quat):
        h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()[:16]


class PlanCache:
    """Plans by their exact inputs, in memory and (when given a folder) on disk.

    Planning is deterministic, and a protocol fixes every input (the seeded cube placement
    included), so a re-run, a resumed run or a latency sweep plans each cube pose once.
    """

    def __init__(self, folder: Path | None = None, capacity: int = 256) -> None:
        self.folder = folder
        self.capacity = capacity
        self._memory: dict[str, list[np.ndarray]] = {}
        self._digests: dict[int, str] = {}
        self.hits = 0
        self.misses = 0

    def key(self, model: Any, fps: int, start: np.ndarray, cube_pos: np.ndarray, cube_yaw: float,
            bowl_xy: tuple[float, float]) -> str:
        digest = self._digests.get(id(model))
        if digest is None:
            digest = self._digests[id(model)] = _model_digest(model)
        h = hashlib.sha256(f"v{PLANNER_VERSION}:{digest}:{fps}".encode())
        for values in (start, cube_pos, (cube_yaw, *bowl_xy)):
            h.update(np.asarray(values, dtype=np.float64).tobytes())
        return h.hexdigest()[:32]

    def plan(self, model: Any, fps: int, start: np.ndarray, cube_pos: np.ndarray, cube_yaw: float,
             bowl_xy: tuple[float, float]) -> list[np.ndarray]:
        key = self.key(model, fps, start, cube_pos, cube_yaw, bowl_xy)
        plan = self._memory.get(key)
        path = self.folder / f"{key}.npy" if self.folder is not None else None
        if plan is None and path is not None and path.is_file():
            plan = list(np.load(path))
        if plan is not None:
            self.hits += 1
        else:
            self.misses += 1
            plan = plan_pick_and_place(model, fps, start, cube_pos, cube_yaw, bowl_xy)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
                np.save(tmp, np.asarray(plan))
                tmp.replace(path)
        if len(self._memory) >= self.capacity:
            self._memory.pop(next(iter(self._memory)))
        self._memory[key] = plan
        return plan


def default_plan_cache() -> PlanCache:
    """The per-user plan cache beside the decimated meshes."""
    from harness.sim.meshes import cache_dir

    return PlanCache(cache_dir().parent / "plans")


def _as_action(q: np.ndarray) -> dict[str, float]:
    return {f"{name}.pos": from_sim(name, float(v)) for name, v in zip(JOINT_NAMES, q, strict=True)}


class _PlannedPolicy(BasePolicy):
    """Plays a plan made at reset; after it ends, holds the last target."""

    name = "planned"
    camera_keys: tuple[str, ...] = ()

    def __init__(self, plans: PlanCache | None = None) -> None:
        self._plan: list[np.ndarray] = []
        self._world: Any | None = None
        self._started_at = 0.0
        self._fps = 30
        self.plans = plans if plans is not None else default_plan_cache()

    def _cube_for_plan(self, context: TrialContext) -> tuple[np.ndarray, float]:
        raise NotImplementedError

    def reset(self, context: TrialContext) -> None:
        world = context.world
        if world is None:
            raise RuntimeError(f"the built-in '{self.name}' policy reads the simulator and runs only with --robot sim")
        start = np.array([to_sim(n, context.protocol.start_pose[n]) for n in JOINT_NAMES])
        cube_pos, cube_yaw = self._cube_for_plan(context)
        self._plan = self.plans.plan(world.model, context.protocol.fps, start, cube_pos, cube_yaw,
                                     world.geometry.bowl_xy)
        self._world, self._started_at, self._fps = world, world.time, context.protocol.fps

    def select_action(self, observation: dict[str, Any]) -> dict[str, float]:
        """The plan's target for the simulated time of this observation: under a latency model the
        policy is asked less often, and it answers for the moment it was asked, as a real one does."""
        if self._world is None:
            raise RuntimeError(f"the built-in '{self.name}' policy was asked for an action before its trial's reset")
        step = round((self._world.time - self._started_at) * self._fps)
        return _as_action(self._plan[min(step, len(self._plan) - 1)])

    def close(self) -> None:
        self._plan = []


class ExpertPolicy(_PlannedPolicy):
    """Plans from the true cube pose, as a motion planner with perfect perception would."""

    name = BuiltinPolicy.EXPERT.value

    def _cube_for_plan(self, context: TrialContext) -> tuple[np.ndarray, float]:
        return context.simulator().cube_pose()


class ReplayPolicy(_PlannedPolicy):
    """Plays the expert's plan for the trained cube position, whatever the offset."""

    name = BuiltinPolicy.REPLAY.value

    def _cube_for_plan(self, context: TrialContext) -> tuple[np.ndarray, float]:
        x, y = (v / 100 for v in context.protocol.scene.trained_cube_xy_cm)
        return np.array([x, y, context.simulator().judge.rest_z]), 0.0


class EmulatedArmExpert(ExpertPolicy):
    """The expert on `harness rehearse`'s emulated arm: it plans from the cube's true pose in the emulator's
    simulator (which a real arm does not have), and plays the plan on that simulator's clock, so a rehearsal
    (and the twin of it) has a policy that succeeds, against which a declared reality gap shows."""

    def __init__(self, world: Any, plans: PlanCache | None = None) -> None:
        super().__init__(plans)
        self.truth = world

    def reset(self, context: TrialContext) -> None:
        super().reset(replace(context, world=self.truth))
