"""The judge's contact reading: only the cube's pairs are decoded, and the sums are those of a full scan."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import JOINT_NAMES
from harness.policies.scripted import plan_pick_and_place
from harness.sim.units import to_sim
from harness.sim.world import SimWorld


def _full_scan(world: SimWorld) -> tuple[float, float, float]:
    """Every contact decoded, one by one: what the judge did before it filtered the pairs."""
    judge, data = world.judge, world.data
    force = np.zeros(6)
    sums = [0.0, 0.0, 0.0]
    for i in range(data.ncon):
        con = data.contact[i]
        if judge.cube_geom not in (con.geom1, con.geom2):
            continue
        other = con.geom2 if con.geom1 == judge.cube_geom else con.geom1
        mujoco.mj_contactForce(world.model, data, i, force)
        for k, geoms in enumerate((judge.fixed_geoms, judge.moving_geoms, judge.palm_geoms)):
            if other in geoms:
                sums[k] += abs(float(force[0]))
                break
    return sums[0], sums[1], sums[2]


@pytest.mark.slow
def test_contact_forces_equal_a_full_scan_through_a_pick_and_place() -> None:
    world = SimWorld()
    world.reset((0.22, -0.05), math.radians(15), DEFAULT_START_POSE)
    cube, yaw = world.cube_pose()
    start = np.array([to_sim(n, DEFAULT_START_POSE[n]) for n in JOINT_NAMES])
    plan = plan_pick_and_place(world.model, 30, start, cube, yaw, world.geometry.bowl_xy)
    both_jaws_steps = 0
    for q in plan:
        world.data.ctrl[:] = q
        for _ in range(world.substeps):
            mujoco.mj_step(world.model, world.data)
            fast = world.judge.cube_contact_forces(world.data)
            assert fast == _full_scan(world)
            both_jaws_steps += fast[0] > 0 and fast[1] > 0
    world.close()
    assert both_jaws_steps > 100  # the comparison covered a real grasp, not only a cube on the table
