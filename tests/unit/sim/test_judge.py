"""The judge on scripted scenarios, with the true physics of the simulated arm."""

from __future__ import annotations

import math

import numpy as np

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.models.defaults import DEFAULT_START_POSE
from harness.policies.scripted import (
    CARRY_HEIGHT,
    GRIPPER_PREGRASP_RAD,
    TrajectoryBuilder,
    plan_pick_and_place,
)
from harness.sim.units import GRIPPER_CLOSED_RAD
from harness.sim.world import SimWorld
from tests.scripted_world import CUBE_XY
from tests.scripted_world import grasped_and_lifted as _grasped_and_lifted
from tests.scripted_world import start_joints as _start


def _play(world: SimWorld, targets: list[np.ndarray], settle_s: float = 2.0) -> dict:
    for q in targets:
        world.step_control(q)
    for _ in range(round(settle_s * world.control_fps)):
        world.step_control(targets[-1])
    return world.judge.verdict(world.data)


def test_clean_pick_and_place_is_a_success(world) -> None:
    world.reset(CUBE_XY, math.radians(10), DEFAULT_START_POSE)
    cube, yaw = world.cube_pose()
    verdict = _play(world, plan_pick_and_place(world.model, 30, _start(), cube, yaw, world.geometry.bowl_xy))
    assert verdict.label == "success"
    assert verdict.clean_release is True
    assert verdict.true_placement_error_cm < 2.0
    assert [e.event for e in verdict.events] == ["grasp", "lift", "release", "withdraw", "stable_in_bowl"]


def test_closing_on_nothing_is_no_grasp(world) -> None:
    world.reset(CUBE_XY, 0.0, DEFAULT_START_POSE)
    cube, _ = world.cube_pose()
    empty = (CUBE_XY[0] - 0.07, CUBE_XY[1] + 0.02)
    b = TrajectoryBuilder(world.model, 30, _start())
    b.move_over((empty[0], empty[1], cube[2] + 0.06), 0.0, 1.0, grip=GRIPPER_PREGRASP_RAD)
    b.straight_line(empty, cube[2], 1.0).gripper(GRIPPER_CLOSED_RAD, 0.5).straight_line(empty, 0.1, 1.0)
    verdict = _play(world, b.targets)
    assert verdict.label == "no_grasp"
    assert verdict.grasped is False


def test_opening_mid_air_away_from_the_bowl_is_a_drop(world) -> None:
    b = _grasped_and_lifted(world)
    b.hold(0.3).gripper(GRIPPER_PREGRASP_RAD, 0.3)
    verdict = _play(world, b.targets)
    assert verdict.label == "grasped_then_dropped"
    assert verdict.lifted is True and verdict.cube_inside_bowl is False


def test_placing_beside_the_bowl_is_wrong_placement(world) -> None:
    b = _grasped_and_lifted(world)
    beside = (world.geometry.bowl_xy[0] + 0.02, world.geometry.bowl_xy[1] - 0.10)
    cube_z = world.judge.rest_z
    b.move_over((beside[0], beside[1], cube_z + CARRY_HEIGHT), 0.0, 1.2)
    b.straight_line(beside, cube_z + 0.003, 1.0).gripper(GRIPPER_PREGRASP_RAD, 0.4)
    b.straight_line(beside, cube_z + 0.08, 0.6)
    verdict = _play(world, b.targets)
    assert verdict.label == "wrong_placement"
    assert verdict.cube_inside_bowl is False
    assert verdict.true_placement_error_cm > world.geometry.bowl_rim_radius * 100


def test_a_cube_knocked_into_the_bowl_without_a_grasp_is_not_a_success(world) -> None:
    world.reset(CUBE_XY, 0.0, DEFAULT_START_POSE)
    bx, by = world.geometry.bowl_xy
    adr = world.cube_qpos
    world.data.qpos[adr:adr + 3] = [bx, by, 0.09]  # knocked off the table, tumbling into the bowl
    verdict = _play(world, [_start()] * 10, settle_s=2.0)
    assert verdict.cube_inside_bowl is True
    assert verdict.label == "no_grasp"
    assert "without a grasp" in verdict.detail


def test_a_cube_still_in_turning_jaws_is_not_slipping(world) -> None:
    """The judge's slip test follows the jaws' own motion at the cube, so a cube the gripper carries while the
    wrist turns is held, wherever between the jaws it sits (issue 37: a policy that turned its wrist at 1-5 rad/s
    carried the cube up and the judge, comparing with the grasp point alone, never confirmed the grasp)."""
    import mujoco

    model, data = world.model, world.data
    data.qvel[:] = 0.0
    data.qvel[model.joint("wrist_roll").dofadr[0]] = 3.0            # rad/s
    data.qvel[model.joint("wrist_flex").dofadr[0]] = -1.0
    mujoco.mj_forward(model, data)
    jaw = model.geom("fixed_jaw_box1").id                            # a point carried rigidly by the gripper
    carried = np.zeros(6)
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_GEOM, jaw, carried, 0)
    grasp = np.zeros(6)
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_SITE, model.site("grasp_point").id, grasp, 0)
    seen = world.judge._jaw_velocity_at(data, data.geom_xpos[jaw])
    assert np.linalg.norm(carried[3:] - grasp[3:]) > world.judge.t.grasp_max_rel_speed   # the old test: "slipping"
    assert np.linalg.norm(carried[3:] - seen) < 1e-9


def test_a_cube_still_falling_over_the_bowl_at_the_time_limit_is_not_said_to_have_come_to_rest(world) -> None:
    """The verdict at a time limit that lands while a released cube falls above the bowl: outside the bowl
    (not yet in it), but not "came to rest outside the bowl" (issue 60)."""
    b = _grasped_and_lifted(world)
    bowl = world.geometry.bowl_xy
    b.move_over((bowl[0], bowl[1], world.judge.rest_z + CARRY_HEIGHT), 0.0, 1.2)
    b.gripper(GRIPPER_PREGRASP_RAD, 0.3).hold(0.5)
    steps_after_release = None
    for q in b.targets:
        world.step_control(q)
        if world.judge.state.released:
            steps_after_release = (steps_after_release or 0) + 1
            if steps_after_release == 2:   # the time limit: two control steps into the fall
                break
    assert steps_after_release == 2
    verdict = world.judge.verdict(world.data)
    assert verdict.cube_inside_bowl is False
    assert verdict.detail == "still falling above the bowl when the trial ended"
    for _ in range(round(2.0 * world.control_fps)):   # where it lands, for the contrast: no longer falling
        world.step_control(b.targets[-1])
    assert world.judge.verdict(world.data).detail != "still falling above the bowl when the trial ended"
