"""The real-arm path rehearsed on the emulated bus: LeRobot's own tools (setup-motors, calibrate,
teleoperate) run through their real entry points against `emulate-bus` servos, with a person's
hands played by the emulator's Python API."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from lerobot.motors import Motor, MotorNormMode
from lerobot.motors.feetech import FeetechMotorsBus

from harness.emulator.remote_rig import open_rig_process
from harness.emulator.scenario import DEFAULT_ASSEMBLY, SO101_NAMES, default_scenario, factory_fresh_scenario, open_rig
from tests.helpers import press_keys, wait_until
from tests.lerobot_tool import LeRobotTool

MIDDLE_POSE_DEG = {name: (45.0 if name == "gripper" else 0.0) for name in SO101_NAMES}


def _joint_deg(rig, name: str) -> float:
    with rig.lock:
        return rig.chain.joint_degrees()[name]


def _wait_until(predicate, timeout_s: float, what: str) -> None:
    wait_until(predicate, timeout_s, what, poll_s=0.05)


@pytest.mark.slow
def test_setup_motors_gives_six_factory_fresh_servos_their_ids(tmp_path: Path, harness_cli) -> None:
    with open_rig(factory_fresh_scenario()) as rig:
        assert {s.current_id for s in rig.chain.servos} == {1}
        tool = LeRobotTool("lerobot.scripts.lerobot_setup_motors",
                           ["--robot.type=so101_follower", f"--robot.port={rig.port}", "--robot.id=fresh"], tmp_path,
                           harness_cli=harness_cli)
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


@pytest.mark.slow
def test_calibrate_by_hand_writes_a_calibration_the_follower_then_uses(tmp_path: Path, harness_cli) -> None:
    from harness.robots.so101 import make_so101_follower

    with open_rig(default_scenario(), sim=True) as rig:
        tool = LeRobotTool("lerobot.scripts.lerobot_calibrate",
                           ["--robot.type=so101_follower", f"--robot.port={rig.port}", "--robot.id=desk_arm",
                            f"--robot.calibration_dir={tmp_path}"], tmp_path, harness_cli=harness_cli)
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
            time.sleep(1 / 30)   # behaviour: a 30 Hz control loop's period, two seconds of it
        assert robot.get_observation()["elbow_flex.pos"] == pytest.approx(30.0, abs=1.0)
        # LeRobot's 0 degrees is the middle of the recorded range (the table cut the elbow's sweep short),
        # so the joint itself sits where that calibration puts 30 degrees.
        elbow = calibration["elbow_flex"]
        raw = (elbow["range_min"] + elbow["range_max"]) / 2 + 30.0 * 4095 / 360 + elbow["homing_offset"]
        assert _joint_deg(rig, "elbow_flex") == pytest.approx((raw - 2047.5) * 360 / 4095, abs=1.5)
        robot.disconnect()


@pytest.mark.slow
def test_teleoperate_follower_follows_a_leader_on_a_second_bus(tmp_path: Path, harness_cli) -> None:
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
                           tmp_path, harness_cli=harness_cli)
        _wait_until(lambda: abs(_joint_deg(follower, "elbow_flex") - 30.0) < 3.0
                    and abs(_joint_deg(follower, "shoulder_lift") + 20.0) < 3.0, 90, "follower never took the pose")
        leader.move("elbow_flex", -15.0, speed_deg_s=60)       # the person moves the leader again
        _wait_until(lambda: abs(_joint_deg(follower, "elbow_flex") + 15.0) < 3.0, 10, "follower did not follow")
        assert tool.finish() == 0, tool.output
    assert not any(s.torque_enabled for s in follower.chain.servos)   # released on exit


TWO_TRIALS = """name: desk
task: Pick up the cube and place it in the bowl.
scene: {bowl_diameter_cm: 11.5, cube_edge_cm: 3.0, trained_cube_xy_cm: [22.0, -5.0], bowl_xy_cm: [18.0, 14.0]}
start_pose: {shoulder_pan: 0.0, shoulder_lift: -60.0, elbow_flex: 60.0, wrist_flex: 70.0, wrist_roll: 0.0,
  gripper: 10.0}
fps: 30
episode_time_limit_s: 3.0
success_definition: Autonomous grasp, lift and release; the cube comes to rest inside the bowl.
failure_taxonomy: [success, no_grasp, grasped_then_dropped, wrong_placement]
run: {robot: so101, policy: expert}
trials:
- {index: 1, dx_cm: 0.0, dy_cm: 0.0}
- {index: 2, dx_cm: 3.0, dy_cm: -2.0, yaw_deg: 15.0}
"""
PLACE = re.compile(r"Place the cube at dx ([-+]\d+\.\d) cm, dy ([-+]\d+\.\d) cm, yaw ([-+]\d+) deg")


@pytest.mark.slow
def test_a_two_trial_real_arm_run_with_a_saved_act_and_simulated_cameras(tmp_path: Path, harness_cli) -> None:
    """`harness run --robot so101` as a person runs it: the emulator (with --sim and its cameras) on the desk,
    a saved LeRobot ACT reading the simulated top camera, the operator placing the cube and scoring."""
    from harness.models.scoresheet import load_scoresheet
    from tests.tiny_policy import save_tiny_act

    checkpoint = save_tiny_act(tmp_path / "act")          # reads `top` at 128x96
    protocol = tmp_path / "desk.yaml"
    protocol.write_text(TWO_TRIALS)
    socket = tmp_path / "cams.sock"
    with open_rig(default_scenario(), sim=True, camera_socket=socket) as rig:
        tool = LeRobotTool("harness.cli", ["run", str(protocol), "--robot", "so101", "--port", rig.port,
                                           "--robot-id", "emulated_follower", "--policy", str(checkpoint),
                                           "--camera", f"top=sim:{socket}@128x96", "--headless"], tmp_path,
                           harness_cli=harness_cli)
        placed = []
        for _ in range(2):
            tool.expect("Place the cube at dx", timeout_s=180)
            tool.expect("then press Enter.")
            dx, dy, yaw = (float(v) for v in PLACE.findall(tool.output)[-1])
            rig.place_cube(dx, dy, yaw)                   # the operator's hands
            with rig.lock:
                placed.append(rig.world.cube_pose()[0][:2] * 100)
            tool.send()
            tool.expect("Score:", timeout_s=120)
            tool.send("n")                                # the policy holds still: no grasp
            tool.expect("Note (optional)")
            tool.send("")
        assert tool.finish() == 0, tool.output[-3000:]
    assert placed[1] == pytest.approx([25.0, -7.0], abs=0.3)   # trained spot (22, -5) + (3, -2) cm
    sheet = load_scoresheet(tmp_path / "scoresheets" / "desk-act.yaml")
    assert [a.label for a in sheet.attempts] == ["no_grasp", "no_grasp"]
    assert all(a.loop.steps >= 60 for a in sheet.attempts)      # ~3 s of the 30 Hz loop each
    assert all(a.loop.realtime is not None for a in sheet.attempts)   # whether the paced loop ran at SCHED_FIFO
    import pandas as pd  # the gripper servo's Present_Load read each step, for failure anatomy (issue 37)

    traces = sorted((tmp_path / "runs" / "desk-act").glob("trial-*/trajectory.parquet"))
    assert len(traces) == 2 and all(pd.read_parquet(t)["obs.gripper.load"].notna().all() for t in traces)
    assert all(a.anatomy is not None and a.anatomy.grasp_signal == "load" for a in sheet.attempts)
    finals = sorted((tmp_path / "runs" / "desk-act").glob("trial-*/*top*.png"))
    assert len(finals) == 2, sorted(p.name for p in (tmp_path / "runs" / "desk-act").rglob("*"))
    assert not any(s.torque_enabled for s in rig.chain.servos)


@pytest.mark.parametrize(("policy", "why"), [("expert", "real arm cannot know"),
                                            ("replay", "a real arm does not have")])
def test_the_sim_only_built_ins_are_refused_on_a_real_arm_before_anything_is_locked(
        workdir: Path, capsys, policy: str, why: str) -> None:
    from harness.cli import main
    from tests.helpers import small_protocol_copy

    protocol = small_protocol_copy(workdir / "protocols")
    code = main(["run", str(protocol), "--robot", "so101", "--port", "/dev/no-such-port", "--policy", policy,
                 "--headless"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--policy" in err[0] and why in err[0] and "checkpoint" in err[0]
    assert [p.relative_to(workdir) for p in workdir.rglob("*") if p.is_file()] == [Path("protocols/small.yaml")]


async def _until(pilot, predicate, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while not predicate():
        state = getattr(pilot.app, "state", None)
        said = {name: getattr(state, name, None) for name in ("phase", "position", "step", "banner", "last_label")}
        assert loop.time() < end, f"timed out on screen {type(pilot.app.screen).__name__}; run state: {said}"
        await pilot.pause(0.05)


def tui_desk_run(protocol_path: Path, checkpoint: Path, port: str, socket: Path) -> tuple[Any, Any, Any]:
    """`harness run --robot so101` on the emulated desk, built for the TUI as its handler builds it: the
    protocol, the run's set-up and the app (no undo window, so a score is recorded at once)."""
    from harness.app.build import FrontEnd, prepare_run
    from harness.app.compare_run import comparison_refs
    from harness.app.request import as_request
    from harness.app.sheet import resolve_sheet
    from harness.app.tui_run import make_app
    from harness.cli import build_parser
    from harness.models.protocol import load_protocol

    args = build_parser().parse_args(["run", str(protocol_path), "--robot", "so101", "--port", port,
                                      "--robot-id", "emulated_follower", "--policy", str(checkpoint),
                                      "--camera", f"top=sim:{socket}@128x96", "--no-video"])
    protocol = load_protocol(protocol_path)
    request = as_request(args)
    assert comparison_refs(request, protocol) is None   # one --policy: a single run, as `harness run` decides
    sheet, _ = resolve_sheet(request, protocol, protocol_path)
    setup = prepare_run(request, protocol, sheet, FrontEnd.TUI)
    return protocol, setup, make_app(setup, undo_s=0.0)


@pytest.mark.slow
def test_one_real_arm_trial_through_the_tui_with_a_scripted_operator(workdir: Path) -> None:
    """The operator's side in the TUI (Textual's pilot): start on the check screen, place the cube where the
    prompt says (the emulator's hands), score with a key; evidence and scoresheet as on a real arm."""
    from harness.models.scoresheet import load_scoresheet
    from harness.tui.screens import CheckScreen, PlaceCubeScreen, ScoreScreen
    from tests.tiny_policy import save_tiny_act

    checkpoint = save_tiny_act(workdir / "act")
    protocol_path = workdir / "protocols" / "desk.yaml"
    one_trial = TWO_TRIALS.split("- {index: 1")[0] + "- {index: 1, dx_cm: 3.0, dy_cm: -2.0, yaw_deg: 15.0}\n"
    protocol_path.write_text(one_trial)
    socket = workdir / "cams.sock"
    with open_rig_process(socket) as rig:   # its own process: this one runs the TUI, the engine and the policy
        _, setup, app = tui_desk_run(protocol_path, checkpoint, rig.port, socket)

        async def operator() -> None:
            async with app.run_test(size=(100, 30)) as pilot:
                assert isinstance(app.screen, CheckScreen)
                await press_keys(pilot, "enter")
                await _until(pilot, lambda: isinstance(app.screen, PlaceCubeScreen), 120)
                rig.place_cube(3.0, -2.0, 15.0)
                await press_keys(pilot, "enter")
                await _until(pilot, lambda: isinstance(app.screen, ScoreScreen), 120)
                await press_keys(pilot, "n")
                await _until(pilot, lambda: app.finished, 60)
                await press_keys(pilot, "q")

        try:
            asyncio.run(operator())
        finally:
            setup.close()
        cube_cm = rig.truth.cube_pose()[0][:2] * 100
        torque = rig.torque_enabled()
    assert cube_cm == pytest.approx([25.0, -7.0], abs=1.0)
    attempts = load_scoresheet(setup.sheet.path).attempts
    assert [(a.label, a.scored_by) for a in attempts] == [("no_grasp", "operator")]
    assert list((workdir / "runs").rglob("*top*.png")), "the final top frame is kept as evidence"
    assert torque and not any(torque.values()), torque


@pytest.mark.slow
def test_record_a_teleoperated_episode_with_the_simulated_cameras(tmp_path: Path, harness_cli) -> None:
    """`lerobot-record` as a person runs it on a desk: a leader on one bus, the follower (with --sim and its
    top camera) on another; the dataset it writes holds the camera's frames and the leader's pose."""
    import numpy as np
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    for folder, arm_id in (("follower", "desk_follower"), ("leader", "desk_leader")):
        (tmp_path / folder).mkdir()
        shutil.copy(DEFAULT_ASSEMBLY, tmp_path / folder / f"{arm_id}.json")
    socket = tmp_path / "cams.sock"
    root = tmp_path / "demos"
    camera = f"{{top: {{type: harness_sim, camera: top, width: 160, height: 120, fps: 30, socket_path: {socket}}}}}"
    with open_rig(default_scenario(), sim=True, camera_socket=socket) as follower, \
            open_rig(default_scenario()) as leader:
        leader.move("elbow_flex", 30.0)
        leader.wait()
        tool = LeRobotTool("lerobot.scripts.lerobot_record",
                           ["--robot.type=so101_follower", f"--robot.port={follower.port}", "--robot.id=desk_follower",
                            f"--robot.calibration_dir={tmp_path / 'follower'}", f"--robot.cameras={camera}",
                            "--teleop.type=so101_leader", f"--teleop.port={leader.port}", "--teleop.id=desk_leader",
                            f"--teleop.calibration_dir={tmp_path / 'leader'}",
                            "--dataset.repo_id=local/desk_demos", f"--dataset.root={root}",
                            "--dataset.single_task=Pick up the cube and place it in the bowl.",
                            "--dataset.num_episodes=1", "--dataset.episode_time_s=4", "--dataset.reset_time_s=0",
                            "--dataset.push_to_hub=false", "--play_sounds=false"],
                           tmp_path, env={"HF_HUB_OFFLINE": "1"}, harness_cli=harness_cli)
        assert tool.finish(timeout_s=300) == 0, tool.output[-3000:]
    assert not any(s.torque_enabled for s in follower.chain.servos)
    dataset = LeRobotDataset("local/desk_demos", root=root)
    assert dataset.num_episodes == 1 and dataset.num_frames >= 30, dataset.num_frames
    last = dataset[dataset.num_frames - 1]
    frame = last["observation.images.top"].numpy()
    assert frame.shape == (3, 120, 160) and float(np.std(frame)) > 0.02          # a rendered scene, not black
    elbow = list(dataset.meta.features["action"]["names"]).index("elbow_flex.pos")
    assert abs(float(last["action"][elbow]) - float(last["observation.state"][elbow])) < 5.0   # the follower followed


@pytest.mark.slow
def test_rollout_a_saved_act_on_the_emulated_arm_with_the_simulated_camera(tmp_path: Path, harness_cli) -> None:
    """`lerobot-rollout` (LeRobot's own deployment tool) runs a saved ACT on the emulated arm, reading the
    simulated top camera: the arm goes where the policy says."""
    from harness.models.defaults import DEFAULT_START_POSE
    from harness.models.protocol import JOINT_NAMES
    from tests.tiny_policy import save_tiny_act

    target = {**DEFAULT_START_POSE, "shoulder_pan": 20.0}
    checkpoint = save_tiny_act(tmp_path / "act", action_mean=[target[n] for n in JOINT_NAMES])
    (tmp_path / "follower").mkdir()
    shutil.copy(DEFAULT_ASSEMBLY, tmp_path / "follower" / "desk_follower.json")
    socket = tmp_path / "cams.sock"
    camera = f"{{top: {{type: harness_sim, camera: top, width: 128, height: 96, fps: 30, socket_path: {socket}}}}}"
    with open_rig(default_scenario(), sim=True, camera_socket=socket) as follower:
        tool = LeRobotTool("lerobot.scripts.lerobot_rollout",
                           ["--strategy.type=base", f"--policy.path={checkpoint}", "--policy.device=cpu",
                            "--robot.type=so101_follower", f"--robot.port={follower.port}", "--robot.id=desk_follower",
                            f"--robot.calibration_dir={tmp_path / 'follower'}", f"--robot.cameras={camera}",
                            "--task=Pick up the cube and place it in the bowl.", "--duration=6", "--fps=30"],
                           tmp_path, env={"HF_HUB_OFFLINE": "1"}, harness_cli=harness_cli)
        _wait_until(lambda: abs(_joint_deg(follower, "shoulder_pan") - 20.0) < 4.0, 240,
                    "the arm never went where the policy said")
        assert tool.finish(timeout_s=300) == 0, tool.output[-3000:]
    assert not any(s.torque_enabled for s in follower.chain.servos)
