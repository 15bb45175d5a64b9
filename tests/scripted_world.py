"""Scripted arm motions in the simulator, shared by the judge, acceptance and proposal tests: each
scores the same physical events (a grasp, a lift) with its own rules."""

from __future__ import annotations

import numpy as np

from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import JOINT_NAMES
from harness.policies.scripted import CARRY_HEIGHT, GRIPPER_PREGRASP_RAD, TrajectoryBuilder
from harness.sim.units import GRIPPER_CLOSED_RAD, to_sim
from harness.sim.world import SimWorld

CUBE_XY = (0.22, -0.05)


def start_joints() -> np.ndarray:
    """The protocol's start pose in simulator radians."""
    return np.array([to_sim(n, DEFAULT_START_POSE[n]) for n in JOINT_NAMES])


def grasped_and_lifted(world: SimWorld) -> TrajectoryBuilder:
    """A fresh scene, then open, descend, close on the cube and lift it to carry height."""
    world.reset(CUBE_XY, 0.0, DEFAULT_START_POSE)
    cube, _ = world.cube_pose()
    b = TrajectoryBuilder(world.model, 30, start_joints())
    b.move_over((cube[0], cube[1], cube[2] + 0.06), 0.0, 1.0, grip=GRIPPER_PREGRASP_RAD)
    b.straight_line(CUBE_XY, cube[2], 1.0).hold(0.2).gripper(GRIPPER_CLOSED_RAD, 0.5).hold(0.3)
    b.straight_line(CUBE_XY, cube[2] + CARRY_HEIGHT, 1.0)
    return b
