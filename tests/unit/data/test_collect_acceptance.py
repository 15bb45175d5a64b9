"""Which attempts become demonstrations: the acceptance filters on scripted trajectories played
through the real simulated arm and judge."""

from __future__ import annotations

import math

import numpy as np
import pytest

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.data.acceptance import AcceptMode, RejectReason, decide
from harness.models.defaults import DEFAULT_START_POSE
from harness.policies.scripted import (
    GRIPPER_PREGRASP_RAD,
    RELEASE_HEIGHT,
    TrajectoryBuilder,
    plan_pick_and_place,
)
from harness.sim.units import GRIPPER_CLOSED_RAD
from harness.sim.world import SimWorld
from tests.scripted_world import CUBE_XY
from tests.scripted_world import grasped_and_lifted as _grasped_and_lifted
from tests.scripted_world import start_joints as _start


def _play(world: SimWorld, targets: list[np.ndarray], settle_s: float = 0.0) -> None:
    for q in targets:
        world.step_control(q)
    for _ in range(round(settle_s * world.control_fps)):
        world.step_control(targets[-1])


def _both(world: SimWorld) -> tuple:
    verdict = world.judge.verdict(world.data)
    return decide(verdict, AcceptMode.STRICT), decide(verdict, AcceptMode.CLEAN_RELEASE)


def test_a_clean_placement_is_accepted_in_both_modes(world) -> None:
    world.reset(CUBE_XY, math.radians(-12), DEFAULT_START_POSE)
    cube, yaw = world.cube_pose()
    _play(world, plan_pick_and_place(world.model, 30, _start(), cube, yaw, world.geometry.bowl_xy), settle_s=1.0)
    strict, clean = _both(world)
    assert strict.accepted and strict.reason is None
    assert clean.accepted and clean.reason is None


def test_a_cube_knocked_into_the_bowl_is_rejected_as_knocked_in(world) -> None:
    world.reset(CUBE_XY, 0.0, DEFAULT_START_POSE)
    bx, by = world.geometry.bowl_xy
    world.data.qpos[world.cube_qpos:world.cube_qpos + 3] = [bx + 0.01, by, 0.09]  # swept off the table
    _play(world, [_start()] * 10, settle_s=2.0)
    assert world.judge.cube_inside_bowl(world.data)
    strict, clean = _both(world)
    assert not strict.accepted and strict.reason is RejectReason.KNOCKED_IN
    assert clean.reason is RejectReason.KNOCKED_IN


def test_a_drop_away_from_the_bowl_is_rejected_as_dropped(world) -> None:
    b = _grasped_and_lifted(world)
    b.hold(0.3).gripper(GRIPPER_PREGRASP_RAD, 0.3).straight_line(CUBE_XY, 0.15, 0.5)
    _play(world, b.targets, settle_s=2.0)
    strict, clean = _both(world)
    assert strict.reason is RejectReason.DROPPED
    assert clean.reason is RejectReason.DROPPED


@pytest.mark.slow
def test_a_regrasp_after_release_passes_strict_but_not_clean_release(world) -> None:
    """Placed and settled (a strict success), then the gripper goes back, grabs the cube in the
    bowl and lets go again: a demonstration that teaches fumbling."""
    world.reset(CUBE_XY, 0.0, DEFAULT_START_POSE)
    cube, yaw = world.cube_pose()
    plan = plan_pick_and_place(world.model, 30, _start(), cube, yaw, world.geometry.bowl_xy)
    place_steps = round(30 * (1.2 + 1.0 + 0.2 + 0.5 + 0.3 + 1.0 + 1.5 + 0.4 + 0.4 + 0.3 + 0.5))
    _play(world, plan[:place_steps], settle_s=1.0)
    assert world.judge.state.success, "the placement itself must already be a strict success"
    in_bowl, _ = world.cube_pose()
    b = TrajectoryBuilder(world.model, 30, plan[place_steps - 1])
    b.straight_line((in_bowl[0], in_bowl[1]), in_bowl[2] + 0.002, 1.0).gripper(GRIPPER_CLOSED_RAD, 0.5).hold(0.3)
    b.straight_line((in_bowl[0], in_bowl[1]), RELEASE_HEIGHT - 0.04, 0.6).gripper(GRIPPER_PREGRASP_RAD, 0.4)
    b.straight_line((in_bowl[0], in_bowl[1]), RELEASE_HEIGHT + 0.04, 0.6)
    _play(world, b.targets, settle_s=1.0)
    strict, clean = _both(world)
    assert strict.accepted
    assert not clean.accepted and clean.reason is RejectReason.REGRASP_AFTER_RELEASE


def test_holding_at_the_time_limit_and_missing_verdicts_are_rejected(world) -> None:
    b = _grasped_and_lifted(world)
    _play(world, b.targets, settle_s=0.5)
    strict, _ = _both(world)
    assert strict.reason is RejectReason.STILL_HOLDING
    assert decide(None, AcceptMode.STRICT).reason is RejectReason.NO_VERDICT
