"""The expert's plan cache: a cached plan is the plan, and only new inputs are planned."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.models.protocol import JOINT_NAMES, load_protocol
from harness.policies.base import TrialContext
from harness.policies.scripted import ExpertPolicy, PlanCache, plan_pick_and_place
from harness.run.stages import SimStage
from harness.sim.units import to_sim
from harness.sim.world import SimWorld

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_a_plan_read_back_from_disk_is_the_plan_and_new_poses_are_planned(tmp_path) -> None:
    protocol = load_protocol(REPO / "tests" / "data" / "small.yaml")
    world = SimWorld(control_fps=protocol.fps)
    start = np.array([to_sim(n, protocol.start_pose[n]) for n in JOINT_NAMES])

    def plan_for(policy: ExpertPolicy, trial_index: int) -> np.ndarray:
        world.set_arm(protocol.start_pose)
        SimStage(world, protocol).place_cube(protocol.trials[trial_index], attempt=1)
        policy.reset(TrialContext(protocol, protocol.trials[trial_index], world))
        return np.asarray(policy._plan)

    first = ExpertPolicy(plans=PlanCache(tmp_path))
    planned = plan_for(first, 0)
    assert (first.plans.hits, first.plans.misses) == (0, 1)
    second = ExpertPolicy(plans=PlanCache(tmp_path))  # a later run: a fresh process would see the same folder
    assert np.array_equal(plan_for(second, 0), planned)
    assert (second.plans.hits, second.plans.misses) == (1, 0)
    cube, yaw = world.cube_pose()
    fresh = plan_pick_and_place(world.model, protocol.fps, start, cube, yaw, world.geometry.bowl_xy)
    assert np.array_equal(np.asarray(fresh), planned)
    plan_for(second, 1)
    assert second.plans.misses == 1
    world.close()
