"""The real-arm path rehearsed on the emulated bus: LeRobot's own tools (setup-motors, calibrate,
teleoperate) run through their real entry points against `emulate-bus` servos, with a person's
hands played by the emulator's Python API."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from lerobot.motors import Motor, MotorNormMode
from lerobot.motors.feetech import FeetechMotorsBus

from harness.bus.scenario import DEFAULT_ASSEMBLY, SO101_NAMES, default_scenario, factory_fresh_scenario, open_rig
from tests.lerobot_tool import LeRobotTool

pytestmark = pytest.mark.slow

MIDDLE_POSE_DEG = {name: (45.0 if name == "gripper" else 0.0) for name in SO101_NAMES}


def _joint_deg(rig, name: str) -> float:
    with rig.lock:
        return rig.chain.joint_degrees()[name]


def _wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_setup_motors_gives_six_factory_fresh_servos_their_ids(tmp_path: Path) -> None:
    with open_rig(factory_fresh_scenario()) as rig:
        assert {s.current_id for s in rig.chain.servos} == {1}
        tool = LeRobotTool("lerobot.scripts.lerobot_setup_motors",
                           ["--robot.type=so101_follower", f"--robot.port={rig.port}", "--robot.id=fresh"], tmp_path)
        for name in reversed(SO101_NAMES):
            tool.expect(f"Connect the controller board to the '{name}' motor only and press enter.")
            with rig.lock:
                rig.chain.only(name)       # the person plugs in this one servo
            tool.send()
            tool.expect(f"'{name}' motor id set to")
        assert tool.finish() == 0, tool.output
        with rig.lock:
            rig.chain.plug(*SO101_NAMES)
            rig.chain.power_cycle()        # the IDs are in EEPROM: they survive
        motors = {name: Motor(i + 1, "sts3215", MotorNormMode.DEGREES) for i, name in enumerate(SO101_NAMES)}
        bus = FeetechMotorsBus(rig.port, motors)
        bus.connect()                       # LeRobot's handshake: every ID present, one firmware
        bus.disconnect()
    assert [s.current_id for s in rig.chain.servos] == [1, 2, 3, 4, 5, 6]


def test_calibrate_by_hand_writes_a_calibration_the_follower_then_uses(tmp_path: Path) -> None:
    from harness.robots.so101 import make_so101_follower

    with open_rig(default_scenario(), sim=True) as rig:
        tool = LeRobotTool("lerobot.scripts.lerobot_calibrate",
                           ["--robot.type=so101_follower", f"--robot.port={rig.port}", "--robot.id=desk_arm",
                            f"--robot.calibration_dir={tmp_path}"], tmp_path)
        tool.expect("to the middle of its range of motion and press ENTER")
        for name, degrees in MIDDLE_POSE_DEG.items():
            rig.move(name, degrees)
        rig.wait()
        tool.send()
        tool.expect("Recording positions. Press ENTER to stop")
        rig.sweep(speed_deg_s=180)          # each joint through its range, as the prompt asks
        rig.wait(90)
        tool.send()
        tool.expect("Calibration saved to")
        assert tool.finish() == 0, tool.output
        calibration = json.loads((tmp_path / "desk_arm.json").read_text())
        assert set(calibration) == set(SO101_NAMES)
        assert all(c["range_max"] - c["range_min"] > 800 for n, c in calibration.items() if n != "wrist_roll")
        assert calibration["gripper"]["homing_offset"] != 0   # held half open, far from 2047 raw

        rig.release()
        robot = make_so101_follower(rig.port, {}, robot_id="desk_arm", calibration_dir=tmp_path,
                                    max_relative_target=None)
        robot.connect()                      # the servos hold what the file says: no calibration prompt
        present = robot.get_observation()
        goal = {**present, "elbow_flex.pos": 30.0, "shoulder_lift.pos": -20.0}
        for _ in range(60):
            robot.send_action(goal)
            time.sleep(1 / 30)
        assert robot.get_observation()["elbow_flex.pos"] == pytest.approx(30.0, abs=1.0)
        # LeRobot's 0 degrees is the middle of the recorded range (the table cut the elbow's sweep short),
        # so the joint itself sits where that calibration puts 30 degrees.
        elbow = calibration["elbow_flex"]
        raw = (elbow["range_min"] + elbow["range_max"]) / 2 + 30.0 * 4095 / 360 + elbow["homing_offset"]
        assert _joint_deg(rig, "elbow_flex") == pytest.approx((raw - 2047.5) * 360 / 4095, abs=1.5)
        robot.disconnect()


def test_teleoperate_follower_follows_a_leader_on_a_second_bus(tmp_path: Path) -> None:
    for folder, arm_id in (("follower", "desk_follower"), ("leader", "desk_leader")):
        (tmp_path / folder).mkdir()
        shutil.copy(DEFAULT_ASSEMBLY, tmp_path / folder / f"{arm_id}.json")   # both arms calibrated alike
    with open_rig(default_scenario(), sim=True) as follower, open_rig(default_scenario()) as leader:
        leader.move("elbow_flex", 30.0)
        leader.move("shoulder_lift", -20.0)
        leader.wait()
        tool = LeRobotTool("lerobot.scripts.lerobot_teleoperate",
                           ["--robot.type=so101_follower", f"--robot.port={follower.port}", "--robot.id=desk_follower",
                            f"--robot.calibration_dir={tmp_path / 'follower'}",
                            "--teleop.type=so101_leader", f"--teleop.port={leader.port}", "--teleop.id=desk_leader",
                            f"--teleop.calibration_dir={tmp_path / 'leader'}", "--fps=30", "--teleop_time_s=12"],
                           tmp_path)
        _wait_until(lambda: abs(_joint_deg(follower, "elbow_flex") - 30.0) < 3.0
                    and abs(_joint_deg(follower, "shoulder_lift") + 20.0) < 3.0, 90, "follower never took the pose")
        leader.move("elbow_flex", -15.0, speed_deg_s=60)       # the person moves the leader again
        _wait_until(lambda: abs(_joint_deg(follower, "elbow_flex") + 15.0) < 3.0, 10, "follower did not follow")
        assert tool.finish() == 0, tool.output
    assert not any(s.torque_enabled for s in follower.chain.servos)   # released on exit
