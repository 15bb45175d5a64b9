"""One real-arm run through the rehearsed path: emulated servos driving the simulated arm, the simulated
top camera through LeRobot's camera API, `harness run --bowl-calibration --trained-spot` in plain mode,
and a scripted operator whose hands are the emulator's: a cube put off target is refused until moved,
then the proposal is confirmed with Enter and recorded beside the measured start."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PIL import Image

from harness.emulator.scenario import default_scenario, open_rig
from harness.models.defaults import DEFAULT_START_POSE
from tests.lerobot_tool import LeRobotTool

PROTOCOL = """name: guided
task: Pick up the cube and place it in the bowl.
scene: {bowl_diameter_cm: 11.5, cube_edge_cm: 3.0, trained_cube_xy_cm: [22.0, -5.0], bowl_xy_cm: [18.0, 14.0]}
start_pose: {shoulder_pan: 0.0, shoulder_lift: -60.0, elbow_flex: 60.0, wrist_flex: 70.0, wrist_roll: 0.0,
  gripper: 10.0}
fps: 30
episode_time_limit_s: 2.0
success_definition: Autonomous grasp, lift and release; the cube comes to rest inside the bowl.
failure_taxonomy: [success, no_grasp, grasped_then_dropped, wrong_placement]
run: {robot: so101, policy: expert}
trials:
- {index: 1, dx_cm: 3.0, dy_cm: -2.0, yaw_deg: 15.0}
"""
TARGET = re.compile(r"target dx ([-+]\d+\.\d) dy ([-+]\d+\.\d) cm yaw ([-+]\d+) deg")


def _check_time_frames(geometry, folder: Path) -> None:
    """What the operator saves at check time: the empty bowl (rim calibration, scene reference) and the cube
    on its trained spot, with the arm at the start pose."""
    import math

    from harness.sim.world import SimWorld
    from harness.vision.calibration import BowlCalibration
    from harness.vision.rim import fit_rim

    start = dict(DEFAULT_START_POSE, shoulder_lift=-60.0, elbow_flex=60.0, wrist_flex=70.0, gripper=10.0)
    world = SimWorld(geometry)   # the same table, drawn as the top camera sees it
    world.set_arm(start)
    world.place_cube((0.60, 0.40), 0.0)
    empty = world.render("top", 640, 480)
    world.place_cube((0.22, -0.05), math.radians(0.0))
    spot = world.render("top", 640, 480)
    world.close()
    BowlCalibration(fit_rim(empty).rim, 11.5, "auto", "bowl.png", "").save(folder / "bowl.yaml", empty)
    Image.fromarray(spot).save(folder / "spot.png")


@pytest.mark.slow
def test_a_guided_real_arm_trial_with_a_proposal_confirmed_by_enter(tmp_path: Path, harness_cli) -> None:
    from harness.models.scoresheet import load_scoresheet
    from tests.tiny_policy import save_tiny_act

    checkpoint = save_tiny_act(tmp_path / "act", height=480, width=640)
    protocol = tmp_path / "guided.yaml"
    protocol.write_text(PROTOCOL)
    socket = tmp_path / "cams.sock"
    with open_rig(default_scenario(), sim=True, camera_socket=socket) as rig:
        _check_time_frames(rig.world.geometry, tmp_path)
        rig.place_cube(80.0, 80.0)                        # out of the camera's view: not yet placed
        tool = LeRobotTool("harness.cli", ["run", str(protocol), "--robot", "so101", "--port", rig.port,
                                           "--robot-id", "emulated_follower", "--policy", str(checkpoint),
                                           "--camera", f"top=sim:{socket}@640x480", "--headless",
                                           "--bowl-calibration", str(tmp_path / "bowl.yaml"),
                                           "--trained-spot", str(tmp_path / "spot.png")], tmp_path,
                           harness_cli=harness_cli)
        tool.expect("empty-scene reference", timeout_s=240)
        tool.send()                                       # the cube is off the table already
        tool.expect("target dx", timeout_s=60)
        dx, dy, yaw = (float(v) for v in TARGET.findall(tool.output)[-1])
        rig.place_cube(dx + 2.0, dy, yaw)                 # 2 cm off: the guide must not start the trial
        tool.expect("move it", timeout_s=60)
        assert "Score:" not in tool.output
        rig.place_cube(dx, dy, yaw)                       # moved onto the target
        tool.expect(" - OK", timeout_s=60)
        tool.expect("Score:", timeout_s=120)
        proposed = tool.output[tool.output.rfind("proposed "):]
        assert proposed.startswith("proposed no-grasp"), proposed[:300]   # the policy holds still: never closed
        tool.send("")                                     # Enter confirms the proposal
        tool.expect("Note (optional)")
        tool.send("")
        assert tool.finish() == 0, tool.output[-3000:]
    sheet = load_scoresheet(tmp_path / "scoresheets" / "guided-act.yaml")
    (attempt,) = sheet.attempts
    assert attempt.label == "no_grasp" and attempt.proposal["label"] == "no_grasp"
    start = attempt.measured_start
    assert start["within_tolerance"] is True and "override_reason" not in start
    assert abs(start["dx_cm"] - 3.0) < 0.5 and abs(start["dy_cm"] + 2.0) < 0.5
    assert not any(s.torque_enabled for s in rig.chain.servos)
