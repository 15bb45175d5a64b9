"""The declared reality gap: each knob parsed and refused by name, and each one changes the emulated arm the way
its name says (servo gain and backlash through the emulated servos, the cube's friction and mass, the top
camera's tilt and exposure through the scene); `harness rehearse --gap` refuses a bad knob before anything runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from harness.errors import HarnessInputError
from harness.models.reality_gap import RealityGap, parse_gap

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)


def test_gap_flags_parse_to_named_knobs_and_bad_ones_are_refused_by_name() -> None:
    gap = parse_gap(["cube_friction=0.3", "servo_backlash_deg=2"])
    assert gap.declared() == {"cube_friction": 0.3, "servo_backlash_deg": 2.0}
    assert gap.describe() == "cube_friction=0.3, servo_backlash_deg=2" and not gap.none
    assert parse_gap(None).none and parse_gap([]).describe() == "no gap"
    from harness.sim.scene import SceneGeometry, gapped_geometry

    assert gapped_geometry(RealityGap()) == SceneGeometry()     # no gap: the emulated table is the twin's
    for bad, field in (("friction=0.3", "--gap"), ("cube_friction", "--gap"), ("cube_friction=nan", "cube_friction"),
                       ("exposure=abc", "exposure"), ("servo_gain=50", "servo_gain"),
                       ("table_height_mm=nan", "table_height_mm"), ("table_height_mm=1e9", "table_height_mm"),
                       ("table_height_mm=25", "table_height_mm")):
        with pytest.raises(HarnessInputError) as caught:
            parse_gap([bad])
        assert field in caught.value.cli_message(), bad
    with pytest.raises(HarnessInputError, match="given twice"):
        parse_gap(["exposure=1.5", "exposure=2"])


def test_rehearse_refuses_a_bad_gap_in_one_line_before_the_emulator_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main
    from tests.realtime.test_rehearse import PROTOCOL

    monkeypatch.chdir(tmp_path)
    (tmp_path / "desk.yaml").write_text(PROTOCOL % "18.0, 14.0")
    assert main(["rehearse", "desk.yaml", "--policy", "expert", "--operator", "scripted", "--gap", "gravity=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "gravity" in err and "cube_friction" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["desk.yaml"]   # nothing written


def test_emulate_bus_takes_a_gap_only_for_the_simulated_arm(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    assert main(["emulate-bus", "--gap", "exposure=2"]) == 2
    assert "--gap: a reality gap is for the simulated arm: add --sim" in capsys.readouterr().err
    assert main(["emulate-bus", "--sim", "--gap", "exposure=9"]) == 2   # refused before the emulator starts
    assert "--gap exposure: 9: must be within 0.2..3" in capsys.readouterr().err
    assert main(["emulate-bus", "--sim", "--gap", "table_height_mm=-inf"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "harness: error: --gap table_height_mm: -inf: must be within -40..20", err   # one line


def _servo_chain(gap: RealityGap):
    import harness.sim  # noqa: F401
    from harness.bus import packets as p
    from harness.emulator.servos import encode_sign_magnitude
    from harness.emulator.sim_coupling import JointCalibration, SimCoupledChain, so101_servos
    from harness.robots.so101 import REPO_CALIBRATION
    from harness.sim.world import SimWorld

    calibration = {name: JointCalibration(c["range_min"], c["range_max"]) for name, c in
                   json.loads((REPO_CALIBRATION / "emulated_follower.json").read_text()).items()}
    world = SimWorld()
    chain = SimCoupledChain(so101_servos(), world, calibration, gain=gap.servo_gain,
                            backlash_deg=gap.servo_backlash_deg)

    def goal(index: int, degrees_from_now: float) -> None:
        servo = chain.servos[index]
        ticks = round(servo.present_ticks + degrees_from_now * 4096 / 360)
        servo.write(p.ADDR_GOAL_POSITION, encode_sign_magnitude(ticks, 15).to_bytes(2, "little"))

    for index, servo in enumerate(chain.servos):
        goal(index, 0.0)
        servo.write(p.ADDR_TORQUE_ENABLE, b"\x01")
    return chain, world, goal


def _run(chain, seconds: float) -> None:
    for _ in range(round(seconds / 0.01)):
        chain.tick(0.01)


@pytest.mark.slow
def test_servo_backlash_swallows_a_reversal_smaller_than_the_play_and_weak_servos_sag_more() -> None:
    ends = {}
    for backlash in (0.0, 4.0):
        chain, world, goal = _servo_chain(RealityGap(servo_backlash_deg=backlash))
        _run(chain, 0.5)
        start = math.degrees(world.joint_positions_rad()[0])
        goal(0, 10.0)                        # shoulder_pan 10 degrees one way
        _run(chain, 1.0)
        goal(0, -2.0)                        # then 2 degrees back: inside 4 degrees of play
        _run(chain, 1.0)
        ends[backlash] = math.degrees(world.joint_positions_rad()[0]) - start
        world.close()
    assert ends[0.0] == pytest.approx(8.0, abs=1.0)
    # the motor drove 10 degrees but the joint trailed by the play (6), and the 2-degree reversal never reached it
    assert ends[4.0] == pytest.approx(6.0, abs=1.0)

    sag, lag = {}, {}
    for gain in (1.0, 0.2):
        chain, world, goal = _servo_chain(RealityGap(servo_gain=gain))
        held = world.joint_positions_rad().copy()
        _run(chain, 1.5)
        sag[gain] = float(np.degrees(np.abs(world.joint_positions_rad() - held)).max())
        start = math.degrees(world.joint_positions_rad()[2])
        goal(2, 20.0)                                     # elbow_flex 20 degrees
        _run(chain, 0.1)
        lag[gain] = 20.0 - (math.degrees(world.joint_positions_rad()[2]) - start)
        world.close()
    assert sag[0.2] > 2 * sag[1.0], sag                   # the same arm under gravity, a fifth of the stiffness
    assert lag[0.2] > lag[1.0] + 2.0, lag                 # and it follows a step more slowly


@pytest.mark.slow
def test_scene_knobs_change_the_cube_and_the_top_camera() -> None:
    import mujoco

    import harness.sim  # noqa: F401
    from harness.sim.scene import gapped_geometry
    from harness.sim.world import SimWorld

    def slide(gap: RealityGap) -> float:
        world = SimWorld(gapped_geometry(gap))
        world.place_cube((0.22, -0.05), 0.0)
        dof = world.model.joint("cube_joint").dofadr[0]
        world.data.qvel[dof] = 0.6                       # a flick along +x
        x0 = float(world.data.qpos[world.cube_qpos])
        for _ in range(150):
            mujoco.mj_step(world.model, world.data)
        moved = float(world.data.qpos[world.cube_qpos]) - x0
        world.close()
        return moved

    assert slide(RealityGap(cube_friction=0.1)) > 2 * slide(RealityGap())

    heavy = SimWorld(gapped_geometry(RealityGap(cube_mass_g=200)))
    assert heavy.model.body_mass[heavy.cube_body] == pytest.approx(0.2)
    heavy.close()

    def top(gap: RealityGap) -> np.ndarray:
        world = SimWorld(gapped_geometry(gap))
        world.place_cube((0.22, -0.05), 0.0)
        frame = world.render("top", 320, 240).astype(float)
        world.close()
        return frame

    plain, bright, tilted = top(RealityGap()), top(RealityGap(exposure=1.6)), top(RealityGap(camera_tilt_deg=10))
    assert bright.mean() > plain.mean() + 10

    def bowl_centre(frame: np.ndarray) -> np.ndarray:
        blue = frame[..., 2] - frame[..., 0] > 60
        return np.argwhere(blue).mean(axis=0)

    # the camera turns about the spot it looks at: the bowl, off that spot, moves in the image (pixels at 320x240)
    assert np.abs(bowl_centre(tilted) - bowl_centre(plain)).max() > 1.5


@pytest.mark.slow
def test_a_lower_table_defeats_a_grasp_planned_for_the_twins_table_but_not_one_from_the_true_pose() -> None:
    """What table height should move: the height a policy closes the gripper at. The expert plans from the
    cube's true pose and follows the table; a plan for the twin's cube height (what a policy that learned the
    twin's table does) closes above a cube 3 cm lower. The judge measures from the table it stands on."""
    import harness.sim  # noqa: F401
    from harness.models.protocol import JOINT_NAMES
    from harness.policies.scripted import plan_pick_and_place
    from harness.sim.scene import SceneGeometry, gapped_geometry
    from harness.sim.units import to_sim
    from harness.sim.world import SimWorld

    start_pose = {"shoulder_pan": 0.0, "shoulder_lift": -60.0, "elbow_flex": 60.0, "wrist_flex": 70.0,
                  "wrist_roll": 0.0, "gripper": 10.0}
    start = np.array([to_sim(name, start_pose[name]) for name in JOINT_NAMES])
    twin_cube_z = SceneGeometry().cube_edge / 2

    def attempt(table_height_mm: float, plan_for_the_twins_table: bool) -> tuple[str, float]:
        world = SimWorld(gapped_geometry(RealityGap(table_height_mm=table_height_mm)))
        world.reset((0.22, -0.05), 0.0, start_pose, seed=1)
        cube, yaw = world.cube_pose()
        assert cube[2] == pytest.approx(table_height_mm / 1000 + twin_cube_z, abs=0.001)   # resting on that table
        if plan_for_the_twins_table:
            cube = np.array([cube[0], cube[1], twin_cube_z])
        plan = plan_pick_and_place(world.model, 30, start, cube, yaw, world.geometry.bowl_xy)
        for step in range(15 * 30):
            world.step_control(plan[min(step, len(plan) - 1)])
            if world.judge.finished:
                break
        verdict = world.judge.verdict(world.data)
        world.close()
        return verdict.label.value, verdict.max_lift_cm

    assert attempt(0.0, True)[0] == "success"         # the two plans are one on the twin's table
    assert attempt(-30.0, False)[0] == "success"      # the expert follows the table down
    label, lift_cm = attempt(-30.0, True)
    assert label != "success" and lift_cm < 2.0, (label, lift_cm)   # closed on the cube's top edge: it slips


@pytest.mark.slow
@pytest.mark.desk
def test_a_rehearsal_with_a_gap_says_so_in_its_locked_sheet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main
    from harness.models.scoresheet import load_scoresheet
    from tests.realtime.test_rehearse import PROTOCOL
    from tests.tiny_policy import save_tiny_act

    monkeypatch.chdir(tmp_path)
    save_tiny_act(tmp_path / "act", height=480, width=640)
    (tmp_path / "desk.yaml").write_text((PROTOCOL % "18.0, 14.0").split("- {index: 2")[0])   # one trial
    assert main(["rehearse", "desk.yaml", "--policy", "act", "--operator", "scripted", "--gap", "exposure=1.3",
                 "--gap", "servo_backlash_deg=1", "--gap", "table_height_mm=-10"]) == 0, \
        capsys.readouterr().out[-2000:]
    assert ("reality gap (recorded in the scoresheet): servo_backlash_deg=1, exposure=1.3, table_height_mm=-10"
            in capsys.readouterr().out)
    sheet = load_scoresheet(tmp_path / "scoresheets"
                            / "desk-act-rehearsal-gap-servo_backlash_deg1-exposure1.3-table_height_mm-10.yaml")
    assert sheet.locked.robot == "so101" and sheet.locked.rehearsal is not None
    assert sheet.locked.rehearsal.gap.declared() == {"servo_backlash_deg": 1.0, "exposure": 1.3,
                                                     "table_height_mm": -10.0}
    assert sheet.locked_data["rehearsal"] == {"gap": {"servo_backlash_deg": 1.0, "exposure": 1.3,
                                                      "table_height_mm": -10.0}}
