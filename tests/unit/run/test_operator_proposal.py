"""Proposals from the gripper's positions and the final top frame agree with the simulator's judge.

The simulated arm plays scripted trials (the judge's own scenarios); the proposer sees only what a
real arm gives: joint positions in LeRobot units, and the top camera's last frame measured with the
bowl rim. The judge sees the true physics. They must agree on every label.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import JOINT_NAMES, Scene, Trial
from harness.models.taxonomy import Label
from harness.policies.scripted import CARRY_HEIGHT, GRIPPER_PREGRASP_RAD, TrajectoryBuilder, plan_pick_and_place
from harness.run.operator_trial import Proposer
from harness.run.placement_guide import TopView, table_axes
from harness.run.proposal import Reason
from harness.run.stages import OperatorStage
from harness.sim.units import GRIPPER_CLOSED_RAD, GRIPPER_LOAD_KEY, from_sim
from harness.sim.world import SimWorld
from harness.vision.measure import Geometry
from harness.vision.rim import fit_rim
from tests.generators.truth import FOVY_DEG
from tests.scripted_world import CUBE_XY
from tests.scripted_world import grasped_and_lifted as _grasped_and_lifted
from tests.scripted_world import start_joints as _start

pytestmark = pytest.mark.slow  # about 30 s of physics and rendering

SIM_GEOMETRY = Geometry(bowl_cm=11.5, bowl_height_cm=4.0, focal_px=240 / math.tan(math.radians(FOVY_DEG / 2)))


def sim_top_view(world: SimWorld) -> TopView:
    """Check time on a real arm: an empty-bowl frame for the rim, the cube on its trained spot for the axes."""
    world.set_arm(DEFAULT_START_POSE)
    world.place_cube((0.60, 0.40), 0.0)
    rim = fit_rim(world.render("top", 640, 480)).rim
    world.place_cube(CUBE_XY, 0.0)
    return table_axes(rim, SIM_GEOMETRY, Scene(), world.render("top", 640, 480))


@pytest.fixture(scope="module")
def rig():
    world = SimWorld()
    view = sim_top_view(world)
    from harness.run.proposal import so101_grasp_point

    yield world, Proposer(view, so101_grasp_point(), fps=world.control_fps)
    world.close()


def play_and_propose(world: SimWorld, proposer: Proposer, targets: list[np.ndarray], settle_s: float = 2.0):
    trace = proposer.trace()
    tail = [targets[-1]] * round(settle_s * world.control_fps)
    for q in [*targets, *tail]:
        world.step_control(q)
        trace.see({n: from_sim(n, v) for n, v in zip(JOINT_NAMES, world.joint_positions_rad(), strict=True)},
                  float(world.servo_loads()[-1]))   # the gripper's load, as a real SO-101 reports it
    proposal = proposer.propose(trace, world.render("top", 640, 480))
    return proposal, world.judge.verdict(world.data)


def _home(b: TrajectoryBuilder) -> list[np.ndarray]:
    """Away from the table at the end, as a policy's last seconds leave it: the final frame shows the cube."""
    return b.joint_move(_start()[:5], GRIPPER_PREGRASP_RAD, 1.2).targets


def test_a_scripted_success_is_proposed_as_success_with_the_measured_placement(rig) -> None:
    world, proposer = rig
    world.reset(CUBE_XY, math.radians(10), DEFAULT_START_POSE)
    cube, yaw = world.cube_pose()
    plan = plan_pick_and_place(world.model, 30, _start(), cube, yaw, world.geometry.bowl_xy)
    proposal, verdict = play_and_propose(world, proposer, plan)
    assert verdict.label == proposal.label == Label.SUCCESS
    assert Reason.SQUEEZED_SOMETHING in proposal.reasons and Reason.OPENED_OVER_BOWL in proposal.reasons
    assert Reason.CUBE_IN_BOWL in proposal.reasons
    assert abs(proposal.placement_error_cm - verdict.true_placement_error_cm) <= proposal.uncertainty_cm + 0.3


def test_closing_on_nothing_is_proposed_as_no_grasp(rig) -> None:
    world, proposer = rig
    world.reset(CUBE_XY, 0.0, DEFAULT_START_POSE)
    cube, _ = world.cube_pose()
    empty = (CUBE_XY[0] - 0.07, CUBE_XY[1] + 0.02)
    b = TrajectoryBuilder(world.model, 30, _start())
    b.move_over((empty[0], empty[1], cube[2] + 0.06), 0.0, 1.0, grip=GRIPPER_PREGRASP_RAD)
    b.straight_line(empty, cube[2], 1.0).gripper(GRIPPER_CLOSED_RAD, 0.5).hold(0.5).straight_line(empty, 0.1, 1.0)
    proposal, verdict = play_and_propose(world, proposer, b.targets)
    assert verdict.label == proposal.label == Label.NO_GRASP
    assert Reason.CLOSED_ON_NOTHING in proposal.reasons


def test_opening_mid_air_away_from_the_bowl_is_proposed_as_a_drop(rig) -> None:
    world, proposer = rig
    b = _grasped_and_lifted(world)
    b.hold(0.3).gripper(GRIPPER_PREGRASP_RAD, 0.3).hold(0.5)
    proposal, verdict = play_and_propose(world, proposer, _home(b))
    assert verdict.label == proposal.label == Label.GRASPED_THEN_DROPPED
    assert Reason.OPENED_MID_AIR in proposal.reasons and Reason.CUBE_NOT_IN_BOWL in proposal.reasons


def test_setting_it_down_beside_the_bowl_is_proposed_as_wrong_placement(rig) -> None:
    world, proposer = rig
    b = _grasped_and_lifted(world)
    beside = (world.geometry.bowl_xy[0] + 0.02, world.geometry.bowl_xy[1] - 0.10)
    cube_z = world.judge.rest_z
    b.move_over((beside[0], beside[1], cube_z + CARRY_HEIGHT), 0.0, 1.2)
    b.straight_line(beside, cube_z + 0.003, 1.0).gripper(GRIPPER_PREGRASP_RAD, 0.4)
    b.straight_line(beside, cube_z + 0.08, 0.6)
    proposal, verdict = play_and_propose(world, proposer, _home(b))
    assert verdict.label == proposal.label == Label.WRONG_PLACEMENT
    assert Reason.OPENED_LOW_AWAY in proposal.reasons


def test_still_holding_at_the_end_is_proposed_as_wrong_placement(rig) -> None:
    world, proposer = rig
    b = _grasped_and_lifted(world).hold(0.5)
    proposal, verdict = play_and_propose(world, proposer, b.targets, settle_s=0.5)
    assert verdict.label == proposal.label == Label.WRONG_PLACEMENT
    assert Reason.STILL_HOLDING in proposal.reasons


def test_the_operator_stage_proposes_from_its_observations_and_records_the_proposal(rig) -> None:
    world, proposer = rig
    shown = []
    stage = OperatorStage(lambda trial: None, proposer=proposer, show_proposal=shown.append)
    stage.place_cube(Trial(index=1, dx_cm=0.0, dy_cm=0.0), 1)
    world.reset(CUBE_XY, 0.0, DEFAULT_START_POSE)
    cube, yaw = world.cube_pose()
    plan = plan_pick_and_place(world.model, 30, _start(), cube, yaw, world.geometry.bowl_xy)
    for q in [*plan, *[plan[-1]] * 45]:
        world.step_control(q)
        joints = {f"{n}.pos": from_sim(n, v) for n, v in zip(JOINT_NAMES, world.joint_positions_rad(), strict=True)}
        # the gripper servo's load, as the SO-101 reports it beside its positions (`robots.so101`)
        stage.observed({**joints, GRIPPER_LOAD_KEY: float(world.servo_loads()[-1]), "top": None})
    stage.observed({**joints, "top": world.render("top", 640, 480)})   # the camera's last frame
    assert stage.verdict() is None   # the operator scores a real arm; the proposal is only a default
    assert [p.label for p in shown] == [Label.SUCCESS] == [world.judge.verdict(world.data).label]
    assert Reason.SQUEEZED_SOMETHING in shown[0].reasons   # the hold read from the servo's squeeze
    assert stage.attempt_fields()["proposal"]["label"] == "success"
    # the operator's success: its placement error, measured on the final frame, is the attempt's own
    fields = stage.attempt_fields(Label.SUCCESS)
    truth = world.judge.verdict(world.data).true_placement_error_cm
    assert fields["placement_error_cm"] == fields["proposal"]["placement_error_cm"]
    assert abs(fields["placement_error_cm"] - truth) <= max(0.5, fields["proposal"]["uncertainty_cm"])
    assert "placement_error_cm" not in stage.attempt_fields(Label.WRONG_PLACEMENT)   # only a success has one
