"""The run engine with the evidence writer: complete folders, and a frozen camera still voids the trial."""

from __future__ import annotations

import io

import pytest

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.errors import RunPaused
from harness.models.protocol import load_protocol
from harness.policies.scripted import ExpertPolicy, PlanCache
from harness.run.clock import MonotonicClock
from harness.run.engine import RunEngine, RunOptions
from harness.run.evidence_writer import EvidenceWriter
from harness.run.safety import GuardedRobot
from harness.run.stages import SimStage
from harness.run.terminal import TerminalObserver
from harness.sim.config_sim_so101 import SimSO101Config
from harness.sim.sim_so101 import SimSO101
from harness.sim.world import SimWorld
from tests.helpers import locked_sheet


def _engine(tmp_path, writer: EvidenceWriter, dropout_at=None) -> tuple[RunEngine, object]:
    sheet = locked_sheet(tmp_path)
    protocol = load_protocol(tmp_path / "small.yaml")
    world = SimWorld(control_fps=protocol.fps)
    robot = SimSO101(SimSO101Config(id="t", render_cameras=[], fps=protocol.fps), world=world)
    robot.connect()
    options = RunOptions(runs_dir=tmp_path / "runs", video_fps=5.0, start_pose_s=0.5, max_attempts=1,
                         evidence_writer=writer)
    guarded = GuardedRobot(robot, release=robot.disable_torque, simulated=robot)
    engine = RunEngine(protocol, sheet, guarded, ExpertPolicy(plans=PlanCache()),
                       SimStage(world, protocol, dropout_at), TerminalObserver(False, out=io.StringIO()),
                       MonotonicClock(), options)
    return engine, sheet


@pytest.mark.slow
def test_a_trial_is_recorded_only_with_its_complete_evidence(tmp_path) -> None:
    writer = EvidenceWriter(SimWorld().geometry, control_fps=30)
    try:
        engine, sheet = _engine(tmp_path, writer)
        engine.run()
    finally:
        writer.close()
    attempt = sheet.attempts[0]
    assert attempt.label == "success"
    assert sorted(attempt.artifacts) == sorted(
        ["final_top.png", "final_wrist.png", "top.mp4", "wrist.mp4", "trajectory.parquet", "judge.json",
         "sim_state.npz"])
    assert not list((tmp_path / "runs").rglob("*.partial"))


@pytest.mark.slow
def test_a_camera_frozen_in_the_rendered_evidence_voids_the_trial_and_pauses(tmp_path) -> None:
    writer = EvidenceWriter(SimWorld().geometry, control_fps=30)
    try:
        engine, sheet = _engine(tmp_path, writer, dropout_at=(1, 30))
        with pytest.raises(RunPaused):
            engine.run()
    finally:
        writer.close()
    attempt = sheet.attempts[0]
    assert attempt.outcome == "void"
    assert attempt.void_reason.startswith("camera dropout: top repeated the same frame")
