"""The simulated arm through LeRobot's own Robot API, as LeRobot's tools would use it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lerobot.robots.config import RobotConfig
from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig
from lerobot.robots.utils import make_robot_from_config
from lerobot.utils.errors import DeviceNotConnectedError
from lerobot.utils.import_utils import register_third_party_plugins

import harness.sim  # noqa: F401
from harness.sim.units import GRIPPER_LOAD_KEY, JOINT_LIMITS, from_sim, to_sim


@pytest.fixture
def robot():
    register_third_party_plugins()  # finds the installed lerobot_robot_harness_sim plugin
    config = RobotConfig.get_choice_class("harness_so101_sim")(render_cameras=["top", "wrist"], camera_width=320,
                                                               camera_height=240)
    robot = make_robot_from_config(config)
    robot.connect()
    yield robot
    if robot.is_connected:
        robot.disconnect()


def test_features_match_the_real_so101_follower(robot, tmp_path) -> None:
    real = SO101Follower(SO101FollowerConfig(port="/dev/null", calibration_dir=tmp_path))
    assert robot.action_features == real.action_features
    motor_keys = {k for k, v in real.observation_features.items() if v is float}
    assert {k for k, v in robot.observation_features.items() if v is float} == motor_keys
    assert robot.observation_features["top"] == (240, 320, 3)
    obs = robot.get_observation()
    # the gripper servo's load rides beside the features, as the real follower's does (robots.so101)
    assert set(obs) == set(robot.observation_features) | {GRIPPER_LOAD_KEY}
    assert -1000.0 <= obs[GRIPPER_LOAD_KEY] <= 1000.0
    assert obs["top"].shape == (240, 320, 3) and obs["top"].dtype == np.uint8
    assert obs["wrist"].std() > 1.0, "the wrist camera should see a scene, not a blank image"


def test_send_action_moves_the_arm_one_control_period_at_a_time(robot) -> None:
    t0 = robot.world.time
    target = {f"{k}": 0.0 for k in robot.action_features}
    target["elbow_flex.pos"] = 30.0
    for _ in range(60):
        sent = robot.send_action(target)
    assert robot.world.time == pytest.approx(t0 + 60 / 30, abs=1e-6)
    assert sent["elbow_flex.pos"] == pytest.approx(30.0)
    assert robot.get_observation()["elbow_flex.pos"] == pytest.approx(30.0, abs=1.0)


def test_targets_are_clamped_to_joint_limits_and_max_relative_target(robot) -> None:
    sent = robot.send_action({"shoulder_pan.pos": 500.0, "gripper.pos": -20.0})
    assert sent["shoulder_pan.pos"] == JOINT_LIMITS["shoulder_pan"][1]
    assert sent["gripper.pos"] == 0.0
    robot.config.max_relative_target = 5.0
    present = robot.get_observation()["elbow_flex.pos"]
    sent = robot.send_action({"elbow_flex.pos": present + 40.0})
    assert sent["elbow_flex.pos"] == pytest.approx(present + 5.0)


def test_disconnected_robot_refuses_io(robot) -> None:
    robot.disconnect()
    assert robot.torque_enabled is False
    with pytest.raises(DeviceNotConnectedError):
        robot.get_observation()
    with pytest.raises(DeviceNotConnectedError):
        robot.send_action({"gripper.pos": 50.0})


@given(name=st.sampled_from(list(JOINT_LIMITS)), value=st.floats(-150, 150))
def test_unit_mapping_round_trips(name, value) -> None:
    assert from_sim(name, to_sim(name, value)) == pytest.approx(value, abs=1e-9)


def test_unit_mapping_anchors() -> None:
    assert to_sim("elbow_flex", 90.0) == pytest.approx(np.pi / 2)
    assert to_sim("gripper", 0.0) == pytest.approx(-0.17453)   # closed
    assert to_sim("gripper", 100.0) == pytest.approx(1.74533)  # fully open
